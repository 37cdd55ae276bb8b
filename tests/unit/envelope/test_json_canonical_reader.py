"""Field mode reads a document spelt as strongroom or Python's ``json.dumps`` writes it with orjson
(``_well_spelt_object``); the result must be the strict reader's in every way that shows: the same values, the
same bytes written back, the same refusals.

The fast reading is taken only when the document is written back byte for byte in one of those spellings (and
no double is spelt where orjson and the canonical writer differ); these tests hold ``load_json_object`` to
``_strict_json_object`` on canonical documents, on documents spelt by other writers and on arbitrary bytes, and
show that strongroom's own documents and ``json.dumps``'s do take the fast reading.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strongroom.envelope import NotJson, NotJsonObject
from strongroom.envelope.json_fields import _json_bytes, _strict_json_object, _well_spelt_object, load_json_object

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def outcome(read: Any, raw: bytes) -> tuple[str, Any]:
    """What a reading shows: the bytes it writes back (and the values), or the refusal's type and message."""
    try:
        document = read(raw)
    except (NotJson, NotJsonObject) as exc:
        return type(exc).__name__, str(exc)
    try:
        written = _json_bytes(document)
    except NotJson as exc:  # read, but not writable back (a number beyond a double)
        return "read, not writable", str(exc)
    return "read", (written, document)


def same_as_strict(raw: bytes) -> None:
    assert outcome(load_json_object, raw) == outcome(_strict_json_object, raw)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_a_canonical_document_reads_as_the_strict_reader_reads_it(document: dict[str, Any]) -> None:
    raw = _json_bytes(_strict_json_object(json.dumps(document).encode("utf-8")))  # strongroom's own spelling
    same_as_strict(raw)
    assert _json_bytes(load_json_object(raw)) == raw


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_a_document_spelt_by_other_writers_reads_as_the_strict_reader_reads_it(document: dict[str, Any]) -> None:
    compact = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    spellings = [json.dumps(document).encode(), compact.encode()]
    with contextlib.suppress(orjson.JSONEncodeError):  # integers beyond 64 bits, lone surrogates: orjson cannot
        spellings.append(orjson.dumps(document))  # orjson's own spelling of doubles (1e-7, 0.00001)
    for raw in spellings:
        same_as_strict(raw)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40).map(lambda b: b'{"a":' + b + b"}") | st.binary(max_size=40))
def test_any_bytes_read_or_are_refused_as_the_strict_reader_does(raw: bytes) -> None:
    same_as_strict(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":1}', b'{"a":{"b":1,"b":1}}', b'{"a":"\\ud800"}', b'{"a":"\\udc00x"}', b'{"a":NaN}',
        b'{"a":1e400}', b'{"a":0.00001}', b'{"a":1e-7}', b'{"a":1e+16}', b'{"a":1e16}', b'{"a":-0}',
        b'{"a":18446744073709551616}', b'{"a":"\\u00e9"}', b'{"a":"\\/"}', b'{ "a":1}', b'\xef\xbb\xbf{"a":1}',
        b'[1]', b'"x"', b"null", b'{"a":"\xff"}', b'{"a":' + b"[" * 300 + b"]" * 300 + b"}",
        b'{"a":' + b"[" * 1010 + b"]" * 1010 + b"}", b'{"id":"6018366e-4fe5-47a7","v":1.5}',
    ],
)  # fmt: skip
def test_duplicates_escapes_doubles_and_depth_are_judged_as_before(raw: bytes) -> None:
    same_as_strict(raw)


def test_duplicate_members_are_refused_however_canonical_the_spelling() -> None:
    with pytest.raises(NotJson, match="twice"):
        load_json_object(b'{"email":"sr1:AAAA","email":"plain@example.com"}')


def test_strongroom_and_json_dumps_documents_take_the_fast_reading() -> None:
    documents = [
        {"event_id": "6018366c-f658-47a7-9ed3-4fe53a096533", "order": {"total": 54.9, "items": 6}, "ok": True},
        {"name": "sr1:9QEBAXiK7s2ejUjq", "tags": ["a", "é", "日本"], "n": None, "big": 2**63, "t": 'x\ny"z\\'},
        {"d": [0.0001, 1234567890123456.0, -0.0, 0.1, 100.0]},
    ]
    for document in documents:
        for raw in (_json_bytes(document), json.dumps(document).encode()):
            assert _well_spelt_object(raw) == document
            same_as_strict(raw)
    # a double with an exponent (or below 1e-4) is left to the strict reader, which writes it canonically
    assert _well_spelt_object(b'{"d":1e-7}') is None
    assert _json_bytes(load_json_object(b'{"d":0.00001}')) == b'{"d":1e-05}'
