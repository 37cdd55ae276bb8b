"""A sealed string's base64 is read in the one spelling strongroom writes (``envelope.sealed_text``)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strongroom.envelope.sealed_text import sealed_envelope


@given(st.binary(max_size=300))
def test_what_strongroom_writes_reads_back(data: bytes) -> None:
    text = base64.b64encode(data).decode("ascii")
    assert sealed_envelope(text) == data
    assert sealed_envelope(text.encode("ascii")) == data


@pytest.mark.parametrize(
    "text",
    [
        "QUJD=",  # excess padding after a complete quantum: binascii's strict mode alone accepts it
        "QUJD====",
        "QUJDRA===",
        "QR==",  # the byte of QQ==, an unused bit set
        "QUJDRB==",  # ABCD with unused bits set
        "QUJDREV=",  # ABCDE (QUJDREU=), its last character's unused bits set
        "QUJDRA",  # padding left out
        "QUJD\n",
        " QUJD",
        "QU JD",
        "QQ==QQ==",
        "=QQ=",
        "QUJD-_==",  # the URL-safe alphabet
        "QUJDé===",
    ],
)
def test_any_other_spelling_is_refused(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - binascii.Error and the canonical check are both ValueErrors
        sealed_envelope(text)


def test_the_same_bytes_spelt_otherwise_are_refused_as_bytes_too() -> None:
    assert sealed_envelope(b"QUJD") == b"ABC"
    with pytest.raises(ValueError):  # noqa: PT011
        sealed_envelope(b"QUJD=")
