"""The audit commands' handling of bad input: one-line errors and the documented exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.cli.main import main


def test_scrub_without_a_cluster_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "scrub", "--ledger", "/nonexistent"]) == 2
    assert "--bootstrap-server is required" in capsys.readouterr().err


def test_bad_span_names_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "scrub", "-b", "127.0.0.1:1", "--span", "soon"]) == 2
    assert "cannot read the duration 'soon'" in capsys.readouterr().err


def test_missing_command_config_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "operations", "--command-config", str(tmp_path / "nope.properties")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: client configuration file")
    assert "Traceback" not in err


def test_report_with_nothing_to_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "report", "--ledger", str(tmp_path / "ledger"), "--output-dir", str(tmp_path / "out")])
    assert code == 1
    assert "nothing to report" in capsys.readouterr().err


def test_justify_needs_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["audit", "justify", "-b", "127.0.0.1:1", "--topic", "t", "--partition", "0", "--up-to-offset", "5"]
    assert main(args) == 2
    assert "--reason" in capsys.readouterr().err


def test_webhook_must_be_http(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["audit", "watch", "-b", "127.0.0.1:1", "--webhook", "ftp://x", "--once", "--state",
                 str(tmp_path / "s.json")])  # fmt: skip
    assert code == 1
    assert "is not http(s)" in capsys.readouterr().err
