"""The ``strongroom.enc`` record header."""

from __future__ import annotations

import pytest

from strongroom.envelope import (
    MalformedEnvelope,
    RecordMarker,
    UnknownValueMode,
    UnsupportedFormatVersion,
    ValueMode,
    find_marker,
    marker_header,
    parse_marker,
)


def test_marker_header_bytes() -> None:
    assert marker_header(ValueMode.WHOLE_VALUE) == ("strongroom.enc", b"\x01\x01")
    assert marker_header(ValueMode.JSON_FIELDS) == ("strongroom.enc", b"\x01\x02")
    assert marker_header(ValueMode.SCHEMA_FIELDS) == ("strongroom.enc", b"\x01\x03")


def test_parse_round_trip() -> None:
    marker = parse_marker(b"\x01\x02")
    assert marker == RecordMarker(1, ValueMode.JSON_FIELDS)
    assert marker.to_bytes() == b"\x01\x02"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (None, MalformedEnvelope),
        (b"", MalformedEnvelope),
        (b"\x01", MalformedEnvelope),
        (b"\x01\x01\x00", MalformedEnvelope),
        (b"\x02\x01", UnsupportedFormatVersion),
        (b"\x00\x01", UnsupportedFormatVersion),
        (b"\x01\x00", UnknownValueMode),
        (b"\x01\x04", UnknownValueMode),  # 0x03 is schema fields (strongroom 0.2); 0x04 is unassigned
    ],
)
def test_bad_header_values(value: bytes | None, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_marker(value)


def test_find_marker() -> None:
    assert find_marker(None) is None
    assert find_marker([]) is None
    assert find_marker([("trace", b"1")]) is None
    headers = [("trace", b"1"), ("strongroom.enc", b"\x01\x01"), ("strongroom.enc", b"\x01\x02")]
    assert find_marker(headers) == RecordMarker(1, ValueMode.WHOLE_VALUE)
