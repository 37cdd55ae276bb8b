"""Every ``strongroom …`` command strongroom tells an operator to run exists (issue 15 item 6).

Hints, remedies and demo narration quote commands: in backticks (```strongroom keys rewrap```), in quotes
(``'strongroom doctor rules'``) or after a shell prompt (``$ strongroom erase …``). Each quoted command is
parsed against the real click command tree: the command path must exist and every option must be one
the command takes. Placeholders (``...``, ``<id>``, an f-string field) stand for values (a field may also
stand for options, so a field left over is not an error); narration after ``->`` is not part of the command;
an option quoted last without its value names the option.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from strongroom.cli.main import cli

SRC = Path(__file__).resolve().parents[2] / "src" / "strongroom"
QUOTED = re.compile(r"(?<![`\w])[`'](strongroom [a-z][^`'\n]*)[`']|\$ (strongroom [a-z][^\n]*)")
PLACEHOLDER = "\x00field"
ELIDED = re.compile(r"<[^<>]*>|\.\.\.|…")


@dataclass(frozen=True)
class QuotedCommand:
    where: str
    command: str


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
    }


def _text(node: ast.Constant | ast.JoinedStr) -> str:
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else PLACEHOLDER for v in node.values)
    return str(node.value)


def quoted_commands(path: Path) -> list[QuotedCommand]:
    """The commands quoted in a module's strings (docstrings, which describe rather than advise, aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _docstrings(tree) | {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        if not is_text or id(node) in skip:
            continue
        for match in QUOTED.finditer(_text(node)):  # type: ignore[arg-type]
            command = (match.group(1) or match.group(2)).strip()
            found.append(QuotedCommand(f"{path.relative_to(SRC.parent)}:{node.lineno}", command))
    return found


def problem_with(command: str) -> str | None:
    """Why ``command`` would not run as written (None when its path and options exist)."""
    words = shlex.split(ELIDED.sub("VALUE", command.split("->")[0]))[1:]
    ctx = click.Context(cli, info_name="strongroom")
    current: click.Command = cli
    while isinstance(current, click.Group) and words and not words[0].startswith("-"):
        sub = current.get_command(ctx, words[0])
        if sub is None:
            return f"{current.name or 'strongroom'} has no command {words[0]!r}"
        current, words = sub, words[1:]
        ctx = click.Context(current, info_name=current.name, parent=ctx)
    if isinstance(current, click.Group):
        return "names a command group, not a command"
    parser = current.make_parser(ctx)
    try:
        _opts, leftover, _order = parser.parse_args(list(words))
    except click.BadOptionUsage as exc:
        if words and exc.option_name == words[-1] and "requires an argument" in exc.message:
            return None  # `--plan-out` quoted to name the option
        return exc.format_message()
    except click.UsageError as exc:
        return exc.format_message()
    leftover = [w for w in leftover if w != PLACEHOLDER]
    arguments = [p for p in current.params if isinstance(p, click.Argument)]
    if leftover and not arguments:
        return f"{current.name} takes no arguments, got {leftover}"
    return None


ALL_QUOTED = [q for path in sorted(SRC.rglob("*.py")) for q in quoted_commands(path)]


def test_the_scan_finds_the_quoted_commands() -> None:
    commands = {q.command for q in ALL_QUOTED}
    assert "strongroom keys create-topic" in commands
    assert any(c.startswith("strongroom kek create --local-kms") for c in commands)
    assert len(ALL_QUOTED) >= 30


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("strongroom keyring create", "has no command 'keyring'"),
        ("strongroom kek", "command group"),
        ("strongroom recover scan --no-such-option", "No such option"),
        ("strongroom erasure status --reason x", "No such option"),
        ("strongroom version extra", "takes no arguments"),
    ],
)
def test_a_command_that_does_not_exist_is_caught(command: str, problem: str) -> None:
    found = problem_with(command)
    assert found is not None
    assert problem in found


@pytest.mark.parametrize("quoted", ALL_QUOTED, ids=lambda q: f"{q.where} {q.command}")
def test_every_quoted_command_exists(quoted: QuotedCommand) -> None:
    assert problem_with(quoted.command) is None, f"{quoted.where}: `{quoted.command}`"
