"""CLI behaviour that needs no server: usage errors, missing KMS, bad plan files, help and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strongroom.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "recover", "scan", "--help")
    assert code == 0
    assert "scattered" in out
    assert "--kek" in out
    code, out, _ = run(capsys, "kek", "inventory", "--help")
    assert code == 0
    assert "not safe to delete" in out


def test_apply_needs_an_action(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text("{}")
    code, _, err = run(capsys, "recover", "apply", "-b", "127.0.0.1:1", "--plan", str(tmp_path / "p.json"))
    assert code == 2
    assert "--delete-records or --reset-offsets" in err


def test_apply_refuses_garbage_plans_before_connecting(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps({"format": "strongroom-recovery-plan/1", "topic": "t"}))
    code, _, err = run(
        capsys, "recover", "apply", "-b", "127.0.0.1:1", "--plan", str(tmp_path / "p.json"), "--delete-records"
    )
    assert code == 1
    assert err.startswith("error: plan file")
    assert "Traceback" not in err


def test_scan_needs_a_kms(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "recover", "scan", "-b", "127.0.0.1:1", "--topic", "t")
    assert code == 1
    assert "needs the KMS" in err


def test_kroxylicious_needs_the_kms_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    keyring = tmp_path / "keyring.json"
    code, _, err = run(
        capsys, "recover", "scan", "-b", "127.0.0.1:1", "--topic", "t", "--format", "kroxylicious",
        "--kms", "local", "--keyring", str(keyring),
    )  # fmt: skip
    assert code == 1
    assert "'local' is not one of vault, aws, inmemory" in err


def test_vault_without_a_token_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VAULT_TOKEN", raising=False)
    monkeypatch.delenv("STRONGROOM_VAULT_TOKEN", raising=False)
    code, _, err = run(
        capsys, "recover", "scan", "-b", "127.0.0.1:1", "--topic", "t", "--kms", "vault",
        "--vault-address", "http://127.0.0.1:8200",
    )  # fmt: skip
    assert code == 1
    assert "needs a token" in err


def test_inmemory_kms_needs_a_kek_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "recover", "scan", "-b", "127.0.0.1:1", "--topic", "t", "--kms", "inmemory")
    assert code == 1
    assert "--kek-file" in err


def test_a_vault_token_file_that_is_not_text_is_named_and_its_bytes_not_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_bytes(b"hvs.\xff\xfesecret")
    argv = ["recover", "scan", "-b", "127.0.0.1:1", "--topic", "t", "--kms", "vault",
            "--vault-address", "http://127.0.0.1:1", "--vault-token-file", str(token_file)]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"--vault-token-file '{token_file}' is not UTF-8 text" in err
    assert "0xff" not in err
    assert "internal error" not in err


def test_a_kek_file_that_is_not_text_is_named_and_its_bytes_not_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kek_file = tmp_path / "keks.json"
    kek_file.write_bytes(b'{"4a1c": "\xff\xfeAAAA"}')
    argv = ["recover", "scan", "-b", "127.0.0.1:1", "--topic", "t", "--kms", "inmemory", "--kek-file", str(kek_file)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"--kek-file '{kek_file}' is not UTF-8 text" in err
    assert "0xff" not in err
