"""Field mode writes JSON with orjson; the bytes must be the stdlib encoder's, byte for byte.

The canonical rendering (compact, non-ASCII as is, ``float.__repr__`` numbers) is what the Spark side
and the frozen vectors expect; these tests compare the fast encoder with the stdlib one on every kind
of value a parsed document can hold, including what orjson refuses (left to the stdlib encoder).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from json_cases import json_trees

from strongroom.envelope import MalformedEnvelope, NotJson
from strongroom.envelope.json_fields import _DECODER, _dumps, _field_json, _json_bytes, _utf8, load_json_object


def stdlib(value: Any) -> bytes:
    return _utf8(_dumps(value))


def parsed(text: str) -> Any:
    """A value as field mode holds it: parsed by its own decoder (doubles as its double type)."""
    return _DECODER.decode(text)


json_values = json_trees(st.text(max_size=8))


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_the_fast_encoder_writes_the_stdlib_bytes_for_any_parsed_value(value: Any) -> None:
    document = parsed(json.dumps(value))
    assert _json_bytes(document) == stdlib(document)


@pytest.mark.parametrize(
    "text",
    [
        "1e16", "1e-07", "0.1", "-0.0", "1.7976931348623157e308", "5e-324", "123456789012345678901234567890",
        "18446744073709551615", "-9223372036854775809", '"\\u2028\\u0000\\u001f\\u007f\\t\\"\\\\/"',
        '{"a":[1.5,2,{"b":1e300}],"é":"日本"}', "[" * 300 + "]" * 300,
    ],
)  # fmt: skip
def test_numbers_escapes_and_depth_orjson_does_not_write_like_the_stdlib(text: str) -> None:
    document = parsed(text)
    assert _json_bytes(document) == stdlib(document)


def test_numbers_beyond_a_double_and_lone_surrogates_are_still_refused() -> None:
    with pytest.raises(NotJson, match="does not fit a double"):
        _json_bytes(parsed('{"a": 1e400}'))
    with pytest.raises(NotJson, match="lone UTF-16 surrogate"):
        load_json_object(b'{"a": "\\ud800"}')


def stdlib_read(plaintext: bytes) -> tuple[str, Any]:
    """What the stdlib decoder makes of a field's plaintext: ("ok", value with its type) or ("refused", None)."""
    try:
        value = _DECODER.decode(plaintext.decode("utf-8"))
    except (ValueError, RecursionError):
        return "refused", None
    return "ok", (type(value), value)


def fast_read(plaintext: bytes) -> tuple[str, Any]:
    try:
        value = _field_json(plaintext, "$.f")
    except MalformedEnvelope:
        return "refused", None
    return "ok", (type(value), value)


@settings(max_examples=600, deadline=None)
@given(json_values | st.text().map(json.dumps))
def test_a_sealed_field_reads_back_as_the_stdlib_reads_it(value: Any) -> None:
    plaintext = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")
    assert fast_read(plaintext) == stdlib_read(plaintext)


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=24) | st.sampled_from([b'"', b"'", b" 1 ", b"\xef\xbb\xbf1", b"01", b"1.", b"-", b"tru"]))
def test_any_bytes_are_read_or_refused_as_the_stdlib_does(plaintext: bytes) -> None:
    assert fast_read(plaintext) == stdlib_read(plaintext)


@pytest.mark.parametrize(
    "plaintext",
    [
        b'"\\ud800"', b'"\\udc00x"', b'"a\\u0000b"', b'"tab\tin"', b'"\x7f"', b"18446744073709551616",
        b"-9223372036854775809", b"9223372036854775807", b"-0", b"1e400", b"NaN", b"Infinity", b'"\xed\xa0\x80"',
        b" null ", b"true\n", b'"\\/"', b'"\xc3\xa9"', b"1 2", b"[]", b'{"a":1,"a":2}', b"",
    ],
)  # fmt: skip
def test_surrogates_controls_big_integers_and_constants_are_read_as_the_stdlib_reads_them(plaintext: bytes) -> None:
    assert fast_read(plaintext) == stdlib_read(plaintext)
