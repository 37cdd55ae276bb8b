"""Builders of real encrypted records for the recovery unit tests (real codecs, real local KMS)."""

from __future__ import annotations

import json
from pathlib import Path

from strongroom.crypto.limits import DekUsagePolicy
from strongroom.envelope import RecordContext, ValueMode, marker_header, seal
from strongroom.envelope.json_fields import encrypt_json_fields
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.kms.envelope_keys import RotatingDekSource
from strongroom.kms.local import LocalKeyringAdmin, LocalKms

TOPIC = "orders"
Headers = list[tuple[str, bytes | None]]


def local_kms(tmp_path: Path) -> tuple[LocalKms, LocalKeyringAdmin]:
    kms = LocalKms.from_config({"path": tmp_path / "keyring.json", "create": True})
    return kms, LocalKeyringAdmin(kms.keyring)


def wrapped_dek_records(
    kms: LocalKms, kek_id: str, n: int, *, per_dek: int = 1000, start: int = 0
) -> list[tuple[Headers, bytes]]:
    """``n`` whole-value WRAPPED_DEK records under ``kek_id``, one DEK per ``per_dek`` records."""
    source = RotatingDekSource(kms, kek_id, DekUsagePolicy(max_encryptions=per_dek))
    records = []
    for i in range(start, start + n):
        value = source.seal(f'{{"n": {i}}}'.encode(), RecordContext(TOPIC, f"k{i}".encode()))
        records.append(([marker_header(ValueMode.WHOLE_VALUE)], value))
    return records


def subject_key_record(key_id: bytes, dek: bytes, subject: bytes = b"alice") -> tuple[Headers, bytes]:
    value = seal(b'{"name": "Alice"}', dek, SubjectKeyRef(key_id), RecordContext(TOPIC, subject))
    return [marker_header(ValueMode.WHOLE_VALUE)], value


def json_fields_record(kms: LocalKms, kek_ids: list[str]) -> tuple[Headers, bytes]:
    """A JSON-fields record with one encrypted field per KEK in ``kek_ids``."""
    plain = b'{"a": "x", "b": "y", "c": 3}'
    merged = json.loads(plain)
    for field, kek_id in zip(("$.a", "$.b"), kek_ids, strict=False):
        # each KEK seals its own field of the plaintext; the sealed fields are merged into one record
        active = RotatingDekSource(kms, kek_id).current()
        sealed = encrypt_json_fields(plain, [field], active.dek, active.key_ref, RecordContext(TOPIC, b"s1"))
        merged[field[2:]] = json.loads(sealed)[field[2:]]
    return [marker_header(ValueMode.JSON_FIELDS)], json.dumps(merged, separators=(",", ":")).encode()
