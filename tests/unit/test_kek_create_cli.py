"""`strongroom kek create --local-kms PATH`: a first-time user makes a local keyring with a KEK (issue 15
item 6), and the error a missing keyring gives names exactly that command."""

from __future__ import annotations

import json
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from strongroom.kms.errors import KmsConfigError, UnknownAlias
from strongroom.kms.local import LocalKms


def strongroom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_creates_the_keyring_file_0600_with_the_kek(tmp_path: Path) -> None:
    ring = tmp_path / "dev" / "ring.json"
    done = strongroom("--output", "json", "kek", "create", "--local-kms", str(ring), "--kek-alias", "orders-kek")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["keyring"] == str(ring)
    assert result["new_keyring"] is True
    assert result["kek_alias"] == "orders-kek"
    assert stat.S_IMODE(ring.stat().st_mode) == 0o600
    kms = LocalKms.from_config({"path": str(ring)})
    assert f"local:{kms.resolve_alias('orders-kek')}" == result["kek"]
    edek = kms.wrap(kms.resolve_alias("orders-kek"), b"\x01" * 32)
    assert kms.unwrap(edek) == b"\x01" * 32


def test_text_output_names_the_pipeline_command_and_the_default_alias(tmp_path: Path) -> None:
    ring = tmp_path / "ring.json"
    done = strongroom("kek", "create", "--local-kms", str(ring))
    assert done.returncode == 0, done.stderr
    assert "created KEK 'strongroom-subjects'" in done.stdout
    assert f"strongroom encrypt --local-kms {ring} --kek-alias strongroom-subjects" in done.stdout
    assert LocalKms.from_config({"path": str(ring)}).resolve_alias("strongroom-subjects")


def test_an_existing_kek_is_never_replaced(tmp_path: Path) -> None:
    ring = tmp_path / "ring.json"
    assert strongroom("kek", "create", "--local-kms", str(ring)).returncode == 0
    before = ring.read_bytes()
    again = strongroom("kek", "create", "--local-kms", str(ring))
    assert again.returncode == 1
    assert again.stderr.startswith("error: alias 'strongroom-subjects' already names KEK ")
    assert "Traceback" not in again.stderr
    assert ring.read_bytes() == before


def test_a_second_kek_goes_into_the_existing_keyring(tmp_path: Path) -> None:
    ring = tmp_path / "ring.json"
    assert strongroom("kek", "create", "--local-kms", str(ring)).returncode == 0
    done = strongroom("--output", "json", "kek", "create", "--local-kms", str(ring), "--kek-alias", "pii-eu")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new_keyring"] is False
    kms = LocalKms.from_config({"path": str(ring)})
    assert kms.resolve_alias("pii-eu") != kms.resolve_alias("strongroom-subjects")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    done = strongroom("kek", "create", "--local-kms", str(tmp_path))
    assert done.returncode == 2
    assert "is a directory" in done.stderr
    assert "Traceback" not in done.stderr


def _quoted_command(hint: str) -> list[str]:
    """The ``strongroom kek create …`` command a hint names (checked before it is run: a hint naming
    another command, such as the old ``strongroom demo``, fails here instead of being started)."""
    match = re.search(r"`(strongroom [^`]+)`", hint)
    assert match, hint
    words = shlex.split(match.group(1))[1:]
    assert words[:3] == ["kek", "create", "--local-kms"], hint
    return words


def test_the_missing_keyring_error_names_the_command_that_creates_it(tmp_path: Path) -> None:
    ring = tmp_path / "my ring.json"
    with pytest.raises(KmsConfigError) as missing:
        LocalKms.from_config({"path": str(ring)})
    assert "does not exist" in missing.value.problem
    done = strongroom(*_quoted_command(missing.value.hint))
    assert done.returncode == 0, done.stderr
    assert LocalKms.from_config({"path": str(ring)}).resolve_alias("strongroom-subjects")


def test_an_unknown_alias_names_the_command_that_creates_it(tmp_path: Path) -> None:
    ring = tmp_path / "ring.json"
    assert strongroom("kek", "create", "--local-kms", str(ring)).returncode == 0
    kms = LocalKms.from_config({"path": str(ring)})
    with pytest.raises(UnknownAlias) as unknown:
        kms.resolve_alias("pii-$(topic)")
    done = strongroom(*_quoted_command(unknown.value.hint))
    assert done.returncode == 0, done.stderr
    assert kms.resolve_alias("pii-$(topic)")


def test_with_a_passphrase_the_keyring_is_sealed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ring = tmp_path / "ring.json"
    monkeypatch.setenv("STRONGROOM_LOCAL_KMS_PASSPHRASE", "correct horse battery staple")
    done = strongroom("kek", "create", "--local-kms", str(ring))
    assert done.returncode == 0, done.stderr
    document = json.loads(ring.read_text())
    assert document["protection"] == "scrypt+aes-256-gcm"
    assert "data" not in document
    assert "correct horse" not in done.stdout + done.stderr
    assert LocalKms.from_config({"path": str(ring)}).resolve_alias("strongroom-subjects")
    monkeypatch.delenv("STRONGROOM_LOCAL_KMS_PASSPHRASE")
    with pytest.raises(KmsConfigError):
        LocalKms.from_config({"path": str(ring)})
