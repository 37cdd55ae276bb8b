"""The strongroom record cut: kinds, key prefixes and dependencies of real envelopes."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from recovery_records import json_fields_record, local_kms, subject_key_record, wrapped_dek_records

from strongroom.envelope import ValueMode, marker_header
from strongroom.envelope.ids import RECORD_HEADER_NAME
from strongroom.recovery.dependency import RecordKind
from strongroom.recovery.formats import MalformedPrefix, StrongroomFormat, record_format
from strongroom.recovery.formats.strongroom import prefix_length
from strongroom.testing.schema_formats import sealed_avro_record, sealed_bytes_record

FMT = StrongroomFormat()


def test_wrapped_dek_record_names_its_kek_and_local_version(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    kek = admin.create_kek("orders")
    admin.rotate_kek(kek)  # version 2 is the primary now
    [(headers, value)] = wrapped_dek_records(kms, kek, 1)
    keys = FMT.record_keys(headers, value)
    assert keys.kind is RecordKind.ENCRYPTED
    [prefix] = keys.prefixes
    assert value.startswith(prefix)
    assert len(prefix) == prefix_length(value)
    dep = FMT.dependency(prefix)
    assert (dep.kek, dep.kek_id, dep.provider, dep.version) == (f"local:{kek}", kek, "local", "v2")
    assert dep.label == f"local:{kek}@v2"
    assert dep.edek is not None
    assert kms.unwrap(dep.edek)
    assert repr(dep) == f"KeyDependency(kek='local:{kek}', version='v2')"  # no key material in logs


def test_records_sharing_a_dek_share_one_prefix(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    kek = admin.create_kek("orders")
    records = wrapped_dek_records(kms, kek, 30, per_dek=10)
    prefixes = {FMT.record_keys(h, v).prefixes[0] for h, v in records}
    assert len(prefixes) == 3


def test_subject_key_record_has_the_key_id_and_no_kek() -> None:
    key_id = bytes(range(16))
    headers, value = subject_key_record(key_id, b"\x11" * 32)
    [prefix] = FMT.record_keys(headers, value).prefixes
    dep = FMT.dependency(prefix)
    assert dep.subject_key_id == key_id
    assert dep.edek is None
    assert dep.kek_id == ""


def test_json_fields_record_has_one_prefix_per_field(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    a, b = admin.create_kek("a"), admin.create_kek("b")
    headers, value = json_fields_record(kms, [a, b])
    keys = FMT.record_keys(headers, value)
    assert keys.kind is RecordKind.ENCRYPTED
    assert sorted(FMT.dependency(p).kek_id for p in keys.prefixes) == sorted([a, b])


def test_json_escaped_slashes_in_the_base64_are_undone(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    headers, value = json_fields_record(kms, [admin.create_kek("a")])
    escaped = value.replace(b"/", b"\\/")
    assert FMT.record_keys(headers, escaped).prefixes == FMT.record_keys(headers, value).prefixes


def test_schema_record_has_one_subject_key_prefix_per_sealed_string_field() -> None:
    key_id = bytes(range(16))
    headers, value = sealed_avro_record(key_id, b"\x11" * 32)
    keys = FMT.record_keys(headers, value)
    assert keys.kind is RecordKind.ENCRYPTED
    assert keys.prefixes == (b"\xf5\x01\x01\x01" + key_id,) * 2  # email and name
    assert FMT.dependency(keys.prefixes[0]).subject_key_id == key_id


SCHEMA = [marker_header(ValueMode.SCHEMA_FIELDS)]


@pytest.mark.parametrize("schema_format", ["avro", "protobuf"])
@pytest.mark.parametrize(("photo", "thumb"), [(b"", b""), (b"x" * 60, b"y"), (bytes(5000), b"z" * 200)])
def test_a_schema_record_whose_only_sealed_fields_are_bytes_names_its_subject_key(
    schema_format: str, photo: bytes, thumb: bytes
) -> None:
    """Raw envelopes of 49 bytes up to 5 kB (one- and two-byte length fields in both formats) are all found."""
    key_id = bytes(range(16))
    headers, value = sealed_bytes_record(schema_format, key_id, b"\x11" * 32, photo=photo, thumb=thumb)
    keys = FMT.record_keys(headers, value)
    assert keys.kind is RecordKind.ENCRYPTED
    assert keys.prefixes == (b"\xf5\x01\x01\x01" + key_id,) * 2  # photo and thumb
    assert FMT.dependency(keys.prefixes[0]).subject_key_id == key_id


KEY_A, KEY_B = b"\xaa" * 16, b"\xbb" * 16
HEAD = b"\x00\x00\x00\x00\x02"  # Confluent frame, schema id 2


def raw_envelope(key_id: bytes, body: bytes = bytes(28), profile: int = 1) -> bytes:
    """The shape of a raw subject-key envelope (nothing here is opened: only its prefix is read)."""
    return b"\xf5\x01\x01\x01" + key_id + bytes((profile,)) + body


INNER = raw_envelope(KEY_B)
OUTER = raw_envelope(KEY_A, bytes(10) + b"\x62" + INNER)  # 81 bytes holding an Avro-framed look-alike


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (HEAD + b"\x62" + raw_envelope(KEY_A), [KEY_A]),  # Avro: zigzag 98 = 49 bytes
        (HEAD + b"\x12\x31" + raw_envelope(KEY_A), [KEY_A]),  # Protobuf: field 2, 49 bytes
        (HEAD + b"\x12\x31" + raw_envelope(KEY_A) + b"\x62" + raw_envelope(KEY_B), [KEY_A, KEY_B]),
        (HEAD + b"\xa2\x01" + OUTER, [KEY_A]),  # the look-alike inside an envelope is never read
        (HEAD + b"\x02" + bytes(10) + b"\x62" + INNER, [KEY_B]),  # ... but is one where nothing holds it
        (HEAD + b"\x78" + raw_envelope(KEY_A), []),  # states 60 / 120 bytes: more than the value holds
        (HEAD + b"\x28" + raw_envelope(KEY_A), []),  # states 20 / 40 bytes: shorter than any envelope
        (HEAD + b"\x62" + raw_envelope(KEY_A, profile=3), []),  # no such AAD profile
        (HEAD + raw_envelope(KEY_A), []),  # the frame's last byte (2) is no length field
        (raw_envelope(KEY_A), []),  # nothing before it
        (HEAD + b"\x80\x80\x80\x80\x80\x62" + raw_envelope(KEY_A), [KEY_A]),  # the last byte alone fits
        (HEAD + b"\x62\x80" + raw_envelope(KEY_A), []),  # 0x80 cannot end a varint
    ],
)
def test_raw_envelopes_are_found_by_their_length_field_and_profile(value: bytes, found: list[bytes]) -> None:
    keys = FMT.record_keys(SCHEMA, value)
    assert keys.kind is RecordKind.ENCRYPTED
    assert keys.prefixes == tuple(b"\xf5\x01\x01\x01" + key_id for key_id in found)


def test_a_sealed_string_field_names_the_record_key_and_bytes_are_not_searched() -> None:
    """Every field of a record is sealed under one subject key: the string fields' envelopes say which."""
    headers, value = sealed_avro_record(KEY_A, b"\x11" * 32)
    keys = FMT.record_keys(headers, value + b"\x62" + raw_envelope(KEY_B))
    assert keys.prefixes == (b"\xf5\x01\x01\x01" + KEY_A,) * 2


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (b"\x00\x00\x00\x00\x01\x02xy", RecordKind.ENCRYPTED),  # no sealed string field present
        (b"\x00\x00\x00\x00\x01\x5csr1:" + b"A" * 28 + b"\x02", RecordKind.MALFORMED),  # not a subject-key envelope
        (b"\x00\x00\x00\x00\x01\x10sr1:" + b"9QEB" * 6, RecordKind.ENCRYPTED),  # too short: not matched
        (None, RecordKind.MALFORMED),
    ],
)
def test_schema_record_kinds(value: bytes | None, kind: RecordKind) -> None:
    assert FMT.record_keys(SCHEMA, value).kind is kind


@pytest.mark.parametrize(
    ("headers", "value", "kind"),
    [
        (None, b"plain text", RecordKind.PLAIN),
        ([("other", b"x")], None, RecordKind.TOMBSTONE),
        ([(RECORD_HEADER_NAME, b"\x01")], b"\xf5...", RecordKind.MALFORMED),  # marker too short
        ([(RECORD_HEADER_NAME, b"\x02\x01")], b"\xf5...", RecordKind.MALFORMED),  # unknown version
        ([(RECORD_HEADER_NAME, b"\x01\x07")], b"\xf5...", RecordKind.MALFORMED),  # unknown mode
        ([(RECORD_HEADER_NAME, None)], b"\xf5...", RecordKind.MALFORMED),
        ([marker_header(ValueMode.WHOLE_VALUE)], None, RecordKind.MALFORMED),
        ([marker_header(ValueMode.WHOLE_VALUE)], b"\xf5\x01\x01\x02\x00", RecordKind.MALFORMED),  # truncated
        ([marker_header(ValueMode.JSON_FIELDS)], b'{"a": "sr1:!!!"}', RecordKind.ENCRYPTED),  # regex skips it
        ([marker_header(ValueMode.JSON_FIELDS)], b'{"a": "sr1:AAAA"}', RecordKind.MALFORMED),  # too short
        ([marker_header(ValueMode.JSON_FIELDS)], b'{"a": "sr1:A"}', RecordKind.MALFORMED),  # not base64
    ],
)
def test_record_kinds(headers: list[tuple[str, bytes | None]] | None, value: bytes | None, kind: RecordKind) -> None:
    assert FMT.record_keys(headers, value).kind is kind


def test_garbage_after_the_marker_is_a_corrupt_prefix_not_a_crash() -> None:
    garbage = b"\x00" * 64  # long enough to hold a "prefix" of 4 bytes plus a body
    [prefix] = FMT.record_keys([marker_header(ValueMode.WHOLE_VALUE)], garbage).prefixes
    with pytest.raises(MalformedPrefix, match="magic byte"):
        FMT.dependency(prefix)


@pytest.mark.parametrize(
    ("prefix", "match"),
    [
        (b"\xf5\x02\x01\x02", "version"),
        (b"\xf5\x01\x09\x02", "cipher"),
        (b"\xf5\x01\x01\x07", "kind"),
        (b"\xf5\x01\x01\x01" + b"\x00" * 3, "16 bytes"),
        (b"\xf5\x01\x01\x02\x00\x03abc\x00\x01x", "provider:kek-id"),
        (b"\xf5\x01\x01\x02\x00\x02\xff\xfe\x00\x01x", "UTF-8"),
        (b"\xf5\x01\x01\x02\x00\x00\x00\x01x", "KEK reference length"),
    ],
)
def test_bad_prefixes_are_named(prefix: bytes, match: str) -> None:
    with pytest.raises(MalformedPrefix, match=match):
        FMT.dependency(prefix)


def test_vault_versions_come_from_the_ciphertext() -> None:
    ciphertext = b"vault:v7:" + base64.b64encode(b"x" * 40)
    kek_ref = b"vault:orders-kek"
    prefix = (
        b"\xf5\x01\x01\x02"
        + len(kek_ref).to_bytes(2, "big")
        + kek_ref
        + len(ciphertext).to_bytes(2, "big")
        + ciphertext
    )
    dep = FMT.dependency(prefix)
    assert (dep.kek, dep.version) == ("vault:orders-kek", "v7")
    renamed = record_format("strongroom", kms_kind="vault", provider_name="vault-eu")
    prefix_eu = prefix.replace(b"\x00\x10vault:orders-kek", b"\x00\x13vault-eu:orders-kek")
    assert renamed.dependency(prefix_eu).version == "v7"
