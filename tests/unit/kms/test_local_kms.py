"""The local keyring KMS: protection at rest, permissions, and several processes at once."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from strongroom.kms.api import Edek, KekState
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KmsAccessDenied,
    KmsConfigError,
    UnknownAlias,
)
from strongroom.kms.local import LocalKeyringAdmin, LocalKms, unwrap_with_kek, wrap_with_kek


def make(path: Path, **extra: object) -> LocalKms:
    return LocalKms.from_config({"path": path, "create": True} | extra)


def test_unprotected_keyring_is_0600_and_plain(tmp_path: Path) -> None:
    kms = make(tmp_path / "k.json")
    kek = LocalKeyringAdmin(kms.keyring).create_kek("orders")
    assert (tmp_path / "k.json").stat().st_mode & 0o777 == 0o600
    document = json.loads((tmp_path / "k.json").read_text())
    assert document["protection"] == "file-permissions-only"
    assert kek in document["data"]["keks"]


def test_passphrase_keyring_is_sealed(tmp_path: Path) -> None:
    kms = make(tmp_path / "k.json", passphrase="pw")
    kek = LocalKeyringAdmin(kms.keyring).create_kek("orders")
    text = (tmp_path / "k.json").read_text()
    assert kek not in text
    assert "orders" not in text
    assert json.loads(text)["protection"] == "scrypt+aes-256-gcm"
    again = LocalKms.from_config({"path": tmp_path / "k.json", "passphrase": "pw"})
    assert again.resolve_alias("orders") == kek


def test_wrong_or_missing_passphrase(tmp_path: Path) -> None:
    make(tmp_path / "k.json", passphrase="pw")
    with pytest.raises(KmsAccessDenied, match="wrong passphrase"):
        LocalKms.from_config({"path": tmp_path / "k.json", "passphrase": "nope"})
    with pytest.raises(KmsConfigError, match="passphrase-protected"):
        LocalKms.from_config({"path": tmp_path / "k.json"})
    make(tmp_path / "plain.json")
    with pytest.raises(KmsConfigError, match="not passphrase-protected"):
        LocalKms.from_config({"path": tmp_path / "plain.json", "passphrase": "pw"})


def test_missing_loose_or_corrupt_keyring(tmp_path: Path) -> None:
    with pytest.raises(KmsConfigError, match="does not exist"):
        LocalKms.from_config({"path": tmp_path / "none.json"})
    make(tmp_path / "k.json")
    os.chmod(tmp_path / "k.json", 0o644)
    with pytest.raises(KmsConfigError, match="chmod 600"):
        LocalKms.from_config({"path": tmp_path / "k.json"})
    (tmp_path / "bad.json").write_text("{not json")
    os.chmod(tmp_path / "bad.json", 0o600)
    with pytest.raises(KmsConfigError, match="corrupt"):
        LocalKms.from_config({"path": tmp_path / "bad.json"})
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)  # nested beyond Python's recursion limit
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{}")
    for name in ("deep.json", "binary.json"):
        os.chmod(tmp_path / name, 0o600)
        with pytest.raises(KmsConfigError, match="corrupt"):
            LocalKms.from_config({"path": tmp_path / name})


def test_states_seen_by_another_instance(tmp_path: Path) -> None:
    writer = make(tmp_path / "k.json")
    reader = make(tmp_path / "k.json")
    admin = LocalKeyringAdmin(writer.keyring)
    kek = admin.create_kek("orders")
    pair = writer.generate_dek(kek)
    assert reader.unwrap(pair.edek) == pair.dek
    admin.set_state(kek, KekState.DISABLED)
    with pytest.raises(KekDisabled):
        reader.unwrap(pair.edek)
    admin.set_state(kek, KekState.ENABLED)
    admin.rotate_kek(kek)
    newer = writer.generate_dek(kek)
    assert reader.unwrap(newer.edek) == newer.dek
    assert reader.unwrap(pair.edek) == pair.dek
    admin.delete_kek(kek)
    with pytest.raises(KekNotFound):
        reader.unwrap(pair.edek)
    with pytest.raises(UnknownAlias):
        reader.resolve_alias("orders")


def test_alias_collision_and_bad_edeks(tmp_path: Path) -> None:
    kms = make(tmp_path / "k.json")
    admin = LocalKeyringAdmin(kms.keyring)
    kek = admin.create_kek("orders")
    with pytest.raises(UnknownAlias, match="already names"):
        admin.create_kek("orders")
    for ciphertext in (b"x", b"\x02" + bytes(40), b"\x01\x00\x00\x00\x09" + bytes(40)):
        with pytest.raises((EdekInvalid, KekNotFound)):
            kms.unwrap(Edek("local", kek, ciphertext))
    with pytest.raises(EdekInvalid, match="1-4096 bytes"):
        kms.wrap(kek, b"")


def test_edek_is_bound_to_its_kek_id() -> None:
    kek = bytes(32)
    ciphertext = wrap_with_kek(kek, "a", 1, b"secret")
    assert unwrap_with_kek(kek, "a", ciphertext) == b"secret"
    with pytest.raises(EdekInvalid):
        unwrap_with_kek(kek, "b", ciphertext)


def _create_many(path: str, worker: int) -> None:
    admin = LocalKeyringAdmin(LocalKms.from_config({"path": path}).keyring)
    for i in range(10):
        admin.create_kek(f"w{worker}-{i}")


def test_several_processes_never_lose_an_update(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    make(path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_create_many, args=(str(path), n)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    kms = LocalKms.from_config({"path": path})
    for n in range(4):
        for i in range(10):
            kms.resolve_alias(f"w{n}-{i}")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
