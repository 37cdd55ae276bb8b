"""The keys/erase/erasure commands refuse bad usage before touching Kafka."""

from __future__ import annotations

import pytest

from strongroom.cli.main import main


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["erase", "-b", "127.0.0.1:1", "alice"], 2, "--reason"),
        (["erase", "-b", "127.0.0.1:1", "--reason", "x"], 2, "at least one SUBJECT"),
        (["erasure", "status", "-b", "127.0.0.1:1"], 2, "--all"),
        (["erasure", "status", "-b", "127.0.0.1:1", "alice", "--all"], 2, "not both"),
        (["keys", "inventory", "-b", "127.0.0.1:1", "--list-subjects"], 2, "--kek"),
        (["keys", "create-topic", "-b", "127.0.0.1:1", "--config", "novalue"], 2, "KEY=VALUE"),
    ],
)
def test_usage_errors(argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    assert message in capsys.readouterr().err


def test_rewrap_without_a_kms_config_says_what_to_pass(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STRONGROOM_KMS_CONFIG", raising=False)
    assert main(["keys", "rewrap", "-b", "127.0.0.1:1"]) == 1
    assert "--kms-config" in capsys.readouterr().err


def test_erase_from_a_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["erase", "-b", "127.0.0.1:1", "--reason", "x", "--from-file", "/nonexistent/file"]) == 2
    assert "does not exist" in capsys.readouterr().err
