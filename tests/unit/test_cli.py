"""The CLI skeleton: global --output, version, one-line errors with exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from strongroom.cli import main as cli_main
from strongroom.errors import ConfigError


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", *args], capture_output=True, text=True, check=False
    )


def test_version_text_and_json() -> None:
    text = run("version")
    assert text.returncode == 0
    assert "strongroom" in text.stdout
    as_json = run("--output", "json", "version")
    assert as_json.returncode == 0
    data = json.loads(as_json.stdout)
    assert data["kafka"] == "4.3.1"
    assert data["pyspark"].startswith("4.")


def test_unknown_command_is_a_usage_error() -> None:
    result = run("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_handled_error_is_one_line_exit_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    @click.command("boom")
    def boom() -> None:
        raise ConfigError("option --x=7 is out of range", hint="use a value between 1 and 5")

    monkeypatch.setitem(cli_main.cli.commands, "boom", boom)
    assert cli_main.main(["boom"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "error: option --x=7 is out of range (use a value between 1 and 5)"


def test_unexpected_error_has_no_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    @click.command("crash")
    def crash() -> None:
        raise RuntimeError("something odd\nsecond line")

    monkeypatch.setitem(cli_main.cli.commands, "crash", crash)
    assert cli_main.main(["crash"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("\n") == 1
    assert "RuntimeError: something odd" in err


def test_dev_status_without_stack() -> None:
    result = run("--output", "json", "dev", "status")
    assert result.returncode == 0
    assert json.loads(result.stdout)["running"] is False


@pytest.mark.parametrize(
    ("argv", "place"),
    [
        (["keys", "show", "-b", "127.0.0.1:1", "alice\udcff"], "argument 5 is"),
        (["audit", "justify", "--topic", "t", "--reason", "\udcff\udcfe"], "argument 6 (after '--reason') is"),
        (["erase", "--reason=\udcff", "bob"], "argument 2 is"),
    ],
)
def test_an_argument_that_is_not_utf8_is_a_usage_error_naming_its_place(
    argv: list[str], place: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates: they were stored (a reason in the operations
    log) or failed deep inside a command with an internal error (a subject)."""
    assert cli_main.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{place} not valid UTF-8 text" in err
    assert "internal error" not in err


def test_an_environment_variable_that_is_not_utf8_is_named_not_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """STRONGROOM_BOOTSTRAP_SERVERS of bytes that are not UTF-8 failed inside confluent-kafka as a SystemError."""
    monkeypatch.setenv("STRONGROOM_VAULT_TOKEN", "hvs.secret\udcff")
    assert cli_main.main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert "environment variable STRONGROOM_VAULT_TOKEN is not valid UTF-8 text" in err
    assert "hvs.secret" not in err
