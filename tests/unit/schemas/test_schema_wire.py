"""The Confluent wire format: magic byte 0, a 4-byte big-endian schema id, the payload."""

from __future__ import annotations

import pytest

from strongroom.schemas.errors import NotFramed, PayloadMismatch
from strongroom.schemas.protobuf_format import split_indexes
from strongroom.schemas.wire import frame, unframe


def test_frame_and_unframe_round_trip() -> None:
    value = frame(258, b"payload")
    assert value == b"\x00\x00\x00\x01\x02payload"
    assert unframe(value) == (258, b"payload")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"", "0 bytes is too short"),
        (b"\x00\x00\x01", "3 bytes is too short"),
        (b'{"email": "x"}', "starts with byte 0x7b, not the Confluent magic byte 0x00"),
        (b"\x01\x00\x00\x00\x01abc", "starts with byte 0x01"),
    ],
)
def test_a_value_without_the_frame_is_refused_naming_what_is_wrong(value: bytes, problem: str) -> None:
    with pytest.raises(NotFramed, match=problem) as caught:
        unframe(value)
    assert "mode 'value' or 'fields'" in caught.value.hint


def test_protobuf_message_indexes() -> None:
    assert split_indexes(b"\x00rest") == ([0], 1)
    assert split_indexes(b"\x04\x02\x06rest") == ([1, 3], 3)  # zigzag: count 2, indexes 1 and 3
    with pytest.raises(PayloadMismatch, match="ends inside its message indexes"):
        split_indexes(b"\x04\x02")
