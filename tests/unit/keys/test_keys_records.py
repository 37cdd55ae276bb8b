"""Keys-topic record layouts: round trips, message keys that make compaction right, strict decoding."""

from __future__ import annotations

import json
import os

import pytest

from strongroom.keys import records
from strongroom.keys.errors import CorruptKeyRecord, InvalidSubject
from strongroom.keys.records import (
    ErasureMarker,
    IgnoredRecord,
    LayoutRecord,
    NudgeRecord,
    SubjectKeyRecord,
    SubjectKeyTombstone,
    WrappingKeyRecord,
    WrappingKeyTombstone,
)
from strongroom.kms.api import Edek

KEY_ID = bytes(range(16))
WK_ID = bytes(range(16, 32))


def subject_key(subject: str = "alice", key_id: bytes = KEY_ID) -> SubjectKeyRecord:
    return SubjectKeyRecord(subject, key_id, WK_ID, os.urandom(60), 1_700_000_000_000, "vault:subjects")


@pytest.mark.parametrize(
    "record",
    [
        subject_key(),
        subject_key("zoë\x00with nul"),
        SubjectKeyTombstone("alice", KEY_ID),
        WrappingKeyRecord(WK_ID, Edek("vault", "subjects", b"vault:v1:abc"), 1),
        WrappingKeyTombstone(WK_ID),
        ErasureMarker("alice", "req-1", "dpo@example.com", "art. 17", 2),
        NudgeRecord(7, 3),
        LayoutRecord(12, 4),
    ],
)
def test_round_trip(record: records.KeysRecord) -> None:
    key, value = records.encode(record)
    assert records.decode(key, value) == record


def test_message_keys_keep_every_key_of_a_subject_and_one_marker() -> None:
    first, _ = records.encode(subject_key(key_id=b"\x01" * 16))
    second, _ = records.encode(subject_key(key_id=b"\x02" * 16))
    assert first != second  # compaction keeps both keys of a subject
    assert first == b"k\x00alice\x00" + b"\x01" * 16
    marker1, _ = records.encode(ErasureMarker("alice", "a", "x", "y", 1))
    marker2, _ = records.encode(ErasureMarker("alice", "b", "x", "y", 2))
    assert marker1 == marker2 == b"e\x00alice"  # a newer request replaces the older marker
    assert records.encode(WrappingKeyRecord(WK_ID, Edek("local", "k", b"x"), 1))[0] == b"w\x00" + WK_ID


def test_subject_key_values_are_compact_binary_and_never_hold_a_plaintext_key() -> None:
    record = subject_key()
    _, value = records.encode(record)
    assert value is not None
    assert value[:2] == b"\x01\x01"  # value version 1, algorithm A256GCM-WK1
    assert record.wrapped_sk in value
    assert len(value) == 2 + 8 + 16 + 16 + 1 + 60 + 2 + len("alice") + 2 + len("vault:subjects")


def test_other_values_are_versioned_json() -> None:
    _, value = records.encode(ErasureMarker("alice", "req-1", "dpo", "art. 17", 2))
    assert value is not None
    document = json.loads(value)
    assert document == {
        "v": 1, "type": "erasure", "request_id": "req-1", "requested_by": "dpo", "reason": "art. 17", "requested_at": 2
    }  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (None, b"{}", "no message key"),
        (b"q\x00what", b"{}", "unknown record kind"),
        (b"k\x00alice\x00" + KEY_ID, b"", "empty value"),
        (b"k\x00alice\x00" + KEY_ID, b"\xff\xfe", "version 0xff"),
        (b"k\x00alice\x00" + KEY_ID, b'{"v": 1, "type": "subject-key"}', "version 0x7b"),
        (b"k\x00alice\x00" + KEY_ID, b"\x01\x01\x00", "truncated"),
        (b"k\x00" + KEY_ID, b"\x01", "malformed"),
        (b"w\x00short", b"{}", "malformed"),
        (b"w\x00" + WK_ID, b'{"v": 2, "type": "wrapping-key"}', "version 2"),
        (b"w\x00" + WK_ID, b'{"v": 1, "type": "erasure"}', "type 'erasure'"),
        (b"w\x00" + WK_ID, b"[1]", "not an object"),
        (b"w\x00" + WK_ID, b"\xff", "not UTF-8 JSON"),
    ],
)
def test_corrupt_records_raise_one_clear_error(key: bytes | None, value: bytes, message: str) -> None:
    with pytest.raises(CorruptKeyRecord, match=message):
        records.decode(key, value)


def test_a_subject_key_value_must_match_its_message_key() -> None:
    key, value = records.encode(subject_key())
    assert value is not None
    other_key, _ = records.encode(subject_key("bob"))
    with pytest.raises(CorruptKeyRecord, match="another subject or key id"):
        records.decode(other_key, value)
    with pytest.raises(CorruptKeyRecord, match="inconsistent lengths"):
        records.decode(key, value + b"x")
    with pytest.raises(CorruptKeyRecord, match="algorithm id 0x09"):
        records.decode(key, value[:1] + b"\x09" + value[2:])


def test_an_unreadable_erasure_marker_is_still_an_erasure_marker() -> None:
    marker = records.decode(b"e\x00alice", b"garbage")
    assert isinstance(marker, ErasureMarker)
    assert marker.subject == "alice"
    assert marker.problem is not None
    newer = records.decode(b"e\x00alice", b'{"v": 9, "type": "erasure"}')
    assert isinstance(newer, ErasureMarker)
    assert "version 9" in (newer.problem or "")


def test_tombstones_of_markers_and_housekeeping_records_are_ignored() -> None:
    assert records.decode(b"e\x00alice", None) == IgnoredRecord("erasure")
    assert records.decode(records.nudge_message_key(3), None) == IgnoredRecord("nudge")
    assert records.decode(records.LAYOUT_KEY, None) == IgnoredRecord("layout")


def test_salvage_reads_subject_and_key_id_from_the_message_key_alone() -> None:
    key, _ = records.encode(subject_key())
    assert records.salvage_subject_key(key) == SubjectKeyTombstone("alice", KEY_ID)
    assert records.salvage_subject_key(b"k\x00") is None


@pytest.mark.parametrize("subject", ["", "x" * 5000, "\udcff"])
def test_invalid_subjects_are_refused(subject: str) -> None:
    with pytest.raises(InvalidSubject):
        records.check_subject(subject)
