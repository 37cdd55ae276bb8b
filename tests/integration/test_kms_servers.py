"""The KMS servers the test kit launches: OpenBao Transit and moto's AWS KMS, real round trips."""

from __future__ import annotations

import base64
from pathlib import Path

from strongroom.testing.moto_server import MotoServer
from strongroom.testing.openbao import OpenBaoServer


def test_openbao_transit_round_trip(openbao: OpenBaoServer) -> None:
    client = openbao.client()
    client.secrets.transit.create_key("roundtrip-kek")
    plaintext = base64.b64encode(b"one value").decode()
    ciphertext = client.secrets.transit.encrypt_data("roundtrip-kek", plaintext)["data"]["ciphertext"]
    assert ciphertext.startswith("vault:v1:")
    decrypted = client.secrets.transit.decrypt_data("roundtrip-kek", ciphertext)["data"]["plaintext"]
    assert base64.b64decode(decrypted) == b"one value"


def test_moto_kms_round_trip(moto_kms: MotoServer) -> None:
    kms = moto_kms.client()
    key_id = kms.create_key(Description="roundtrip")["KeyMetadata"]["KeyId"]
    blob = kms.encrypt(KeyId=key_id, Plaintext=b"one value", EncryptionContext={"topic": "t"})["CiphertextBlob"]
    assert kms.decrypt(CiphertextBlob=blob, EncryptionContext={"topic": "t"})["Plaintext"] == b"one value"


def test_persistent_openbao_keeps_keys_across_restart(tmp_path: Path) -> None:
    first = OpenBaoServer(persistent_dir=tmp_path / "bao").start()
    try:
        first.client().secrets.transit.create_key("durable-kek")
        ct = first.client().secrets.transit.encrypt_data("durable-kek", base64.b64encode(b"kept").decode())
    finally:
        first.stop()
    second = OpenBaoServer(persistent_dir=tmp_path / "bao", port=first.port).start()
    try:
        out = second.client().secrets.transit.decrypt_data("durable-kek", ct["data"]["ciphertext"])
        assert base64.b64decode(out["data"]["plaintext"]) == b"kept"
        assert (tmp_path / "bao" / "root-token").stat().st_mode & 0o777 == 0o600
    finally:
        second.stop()
