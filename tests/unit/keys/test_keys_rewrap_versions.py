"""KEK version detection for rewrap (Vault ciphertext prefix, local EDEK header)."""

from __future__ import annotations

from pathlib import Path

from strongroom.keys.rewrap import _retire_advice, kek_version
from strongroom.kms.api import Edek
from strongroom.kms.local import LocalKeyringAdmin, LocalKms


def test_vault_versions_come_from_the_ciphertext() -> None:
    assert kek_version(Edek("vault", "subjects", b"vault:v7:abc")) == 7
    assert kek_version(Edek("aws", "arn", b"\x01\x02opaque")) is None


def test_local_versions_come_from_the_edek_header(tmp_path: Path) -> None:
    kms = LocalKms.from_config({"path": tmp_path / "kr.json", "create": True})
    admin = LocalKeyringAdmin(kms.keyring)
    kek = admin.create_kek("subjects")
    first = kms.wrap(kek, b"k" * 32)
    admin.rotate_kek(kek)
    second = kms.wrap(kek, b"k" * 32)
    assert kek_version(first, kms) == 1
    assert kek_version(second, kms) == 2
    assert kek_version(second) == 2  # recognised by the provider name without a KMS


def test_retire_advice_names_the_lowest_version_in_use() -> None:
    advice = _retire_advice({"vault:subjects": {"3": 2, "4": 1}, "aws:arn": {"?": 1}, "vault:new": {"1": 5}})
    assert len(advice) == 1
    assert "min_decryption_version=3" in advice[0]
