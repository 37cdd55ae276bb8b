"""Plain-text rendering shared by the CLI, the demo and the reports, and the one parser of JSON/YAML settings
text that may hold secrets (no I/O, no click)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final


def is_utf8_text(value: str) -> bool:
    """Whether ``value`` can be written as UTF-8: bytes that were not UTF-8 (an argument, an environment variable)
    reach Python as lone surrogates, which every encoder, client library and JSON reader refuses."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


#: Settings files are small documents: deeper nesting, or YAML aliases that expand a document beyond this many
#: values, is a mistake or an attack (an alias "bomb" is small on disk and huge once its aliases are followed).
MAX_SETTINGS_DEPTH: Final = 64
MAX_SETTINGS_VALUES: Final = 100_000
#: A key is named in an error only when it looks like a setting's name: a key is never a secret by design, but a
#: value pasted where a key belongs could be.
_PRINTABLE_KEY: Final = re.compile(r"[A-Za-z0-9_.$<>-]{1,64}")


class SecretFileError(ValueError):
    """A file that may hold secrets could not be read or parsed; the message names the file and the place,
    never the file's bytes."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def read_secret_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of a file that may hold secrets (a token, KEKs, a rules file's ``kms:`` section).

    ``what`` names the file in errors, as the user gave it (``--kms-config``, ``rules file``). Errors never quote
    the file's bytes: Python's ``UnicodeDecodeError`` shows the byte it stopped at, and that byte may be a
    token's. Raises :class:`SecretFileError`."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SecretFileError(
            f"cannot read {what} {str(path)!r}: {exc.strerror or type(exc).__name__}", hint="check the path"
        ) from None
    except UnicodeDecodeError as exc:
        raise SecretFileError(
            f"{what} {str(path)!r} is not UTF-8 text (invalid at byte offset {exc.start})",
            hint="save the file as UTF-8",
        ) from None


def load_secret_settings(path: str | Path, what: str, *, yaml_syntax: bool | None = None) -> Any:
    """The JSON (or, by the ``.yaml``/``.yml`` extension unless ``yaml_syntax`` says, YAML) settings in a file
    that may hold secrets: :func:`read_secret_file` then :func:`parse_secret_text`. Raises
    :class:`SecretFileError`."""
    text = read_secret_file(path, what)
    if yaml_syntax is None:
        yaml_syntax = str(path).endswith((".yaml", ".yml"))
    try:
        return parse_secret_text(text, yaml_syntax=yaml_syntax)
    except ValueError as exc:
        raise SecretFileError(f"cannot parse {what} {str(path)!r}: {exc}", hint="fix the file's syntax") from None


def parse_secret_text(text: str, *, yaml_syntax: bool) -> Any:
    """Parse JSON (or YAML) settings that may hold secrets (a Vault token): a syntax error names the line and
    column and what is wrong, never the text around it, which parsers like to quote and which may be the
    secret. A key given twice in one object is refused (which one counts would be a guess that a reviewer of
    the file cannot see), as are nesting deeper than :data:`MAX_SETTINGS_DEPTH` and YAML aliases that expand
    the document beyond :data:`MAX_SETTINGS_VALUES` values or into themselves. Raises ``ValueError``."""
    try:
        return _parse_yaml(text) if yaml_syntax else _parse_json(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_SETTINGS_DEPTH} levels deep") from None


def _parse_json(text: str) -> Any:
    try:
        data = json.loads(text, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    _check_json(data)
    return data


class _RepeatedKeys(dict[str, Any]):
    """A JSON object that named a key more than once (refused by :func:`_check_json` with its place)."""

    repeated: str = ""


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) == len(pairs):
        return data
    flagged = _RepeatedKeys(data)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            flagged.repeated = key
            break
        seen.add(key)
    return flagged


def _check_json(data: Any) -> None:
    """Refuse a repeated key (naming the first in document order), deep nesting and too many values."""
    pending: list[tuple[Any, str, int]] = [(data, "", 0)]
    values = 0
    while pending:
        value, path, depth = pending.pop()
        values += 1
        if values > MAX_SETTINGS_VALUES:
            raise ValueError(f"more than {MAX_SETTINGS_VALUES} values (settings are small documents)")
        if depth > MAX_SETTINGS_DEPTH:
            raise ValueError(f"nested more than {MAX_SETTINGS_DEPTH} levels deep")
        if isinstance(value, _RepeatedKeys):
            raise ValueError(f"{_key_name(value.repeated)} appears more than once in {path or 'the top-level object'}")
        if isinstance(value, dict):
            children = [(v, f"{path}.{_key_part(k)}" if path else _key_part(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        else:
            continue
        pending.extend(reversed(children))  # document order: the first problem in the file is the one named


def _key_name(key: object) -> str:
    return f"the key {key!r}" if isinstance(key, str) and _PRINTABLE_KEY.fullmatch(key) else "a key"


def _key_part(key: object) -> str:
    """A key as a step of a place named in an error: ``?`` unless it looks like a setting's name."""
    return key if isinstance(key, str) and _PRINTABLE_KEY.fullmatch(key) else "?"


def _parse_yaml(text: str) -> Any:
    import yaml

    loader = _strict_yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_nodes(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{exc.problem or exc.context or 'invalid YAML'}{where}") from None
    except yaml.YAMLError:
        raise ValueError("invalid YAML") from None
    finally:
        loader.dispose()


@functools.cache
def _strict_yaml_loader() -> type[Any]:
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last one silently).
    Keys merged in with ``<<: *defaults`` may be overridden, as YAML intends."""
    import yaml

    class StrictSafeLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types here
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                        continue
                    key = self.construct_object(key_node)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"{_key_name(key)} appears more than once in a mapping", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictSafeLoader


def _check_yaml_nodes(root: Any) -> None:
    """Refuse aliases that expand the document beyond the bounds or into themselves, before anything is built
    from it (a shared node is counted once per place it appears, as a consumer of the settings would see it)."""
    import yaml

    shapes: dict[int, tuple[int, int]] = {}  # id(node) -> (values once expanded, levels)
    inside: set[int] = set()
    too_deep = f"nested more than {MAX_SETTINGS_DEPTH} levels deep"

    def refuse(problem: str, node: Any) -> yaml.MarkedYAMLError:
        return yaml.MarkedYAMLError(problem=problem, problem_mark=node.start_mark)

    def shape(node: Any, depth: int) -> tuple[int, int]:
        known = shapes.get(id(node))
        if known is None:
            if id(node) in inside:
                raise refuse("an alias refers to a node that contains it", node)
            if depth > MAX_SETTINGS_DEPTH:
                raise refuse(too_deep, node)
            values, levels = 1, 1
            if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
                children = node.value if isinstance(node, yaml.SequenceNode) else [n for kv in node.value for n in kv]
                inside.add(id(node))
                for child in children:
                    child_values, child_levels = shape(child, depth + 1)
                    values, levels = min(values + child_values, MAX_SETTINGS_VALUES + 1), max(levels, child_levels + 1)
                inside.discard(id(node))
            known = shapes[id(node)] = (values, levels)
        if known[0] > MAX_SETTINGS_VALUES:
            raise refuse(f"holds more than {MAX_SETTINGS_VALUES} values once its aliases are followed", node)
        if depth + known[1] - 1 > MAX_SETTINGS_DEPTH:
            raise refuse(too_deep, node)
        return known

    shape(root, 0)


def problem_list(errors: Iterable[Mapping[str, Any]], limit: int = 8) -> str:
    """A validation error's problems as ``place: what`` (pydantic's ``errors(include_input=False)``), the first
    ``limit`` of them: a file with hundreds of the same mistake gets a readable message."""
    items = [_problem(error) for error in errors]
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def _problem(error: Mapping[str, Any]) -> str:
    what = str(error["msg"]).removeprefix("Value error, ")  # pydantic's prefix for a validator's own message
    place = ".".join(str(part) for part in error["loc"])
    return f"{place}: {what}" if place else what
