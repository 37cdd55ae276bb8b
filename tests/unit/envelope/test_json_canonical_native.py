"""The native field-mode reader (``strongroom.envelope._canonical``) held to the Python reader and writer (issue 18).

``canonical`` may answer None for anything; when it answers, it must be what ``load_json_object`` reads and
``_json_bytes`` writes, byte for byte. ``encrypt_json_fields`` and ``decrypt_json_fields`` take it for rules of
top-level members; with it turned off they must write the same bytes (nonces fixed), open the same and refuse
the same, with the same error.
"""

from __future__ import annotations

import functools
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from json_cases import documents, hostile_bytes, integers_in

from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import FIELD_PREFIX, KeyRef, RecordContext, SubjectKeyRef, json_fields
from strongroom.envelope.json_fields import (
    _DECODER,
    _find_sealed,
    _json_bytes,
    decrypt_json_fields,
    encrypt_json_fields,
    load_json_object,
)
from strongroom.errors import EnvelopeError

_canonical = pytest.importorskip("strongroom.envelope._canonical")
canonical = _canonical.canonical

DEK = bytes(range(32))
OTHER_DEK = bytes(range(1, 33))
REF = SubjectKeyRef(bytes(range(16)))
CTX = RecordContext("customers.enc", b"customer-7")
RULES = ["$.name", "$.email", "$.address", '$["é x"]']
NAMES = (b"name", b"email", b"address", "é x".encode())
_REFUSED = object()


def test_the_build_made_it() -> None:
    assert json_fields.NATIVE, "strongroom/envelope/_canonical.so is missing: `make` builds it (needs gcc)"


def python_reading(data: bytes, top_object: bool) -> tuple[Any, bytes] | object:
    """What the Python reader and writer make of ``data``: (document, canonical bytes), or _REFUSED."""
    try:
        document = load_json_object(data) if top_object else _DECODER.decode(data.decode("utf-8"))
        return document, _json_bytes(document)
    except (EnvelopeError, ValueError, RecursionError):
        return _REFUSED


def check_agrees(data: bytes, top_object: bool = True) -> bool:
    """Assert the native answer is None or the Python one; True when it answered."""
    got = canonical(data, NAMES if top_object else (), top_object)
    if got is None:
        return False
    want = python_reading(data, top_object)
    assert want is not _REFUSED, f"native accepted what the Python reader refuses: {data!r}"
    document, text = want  # type: ignore[misc]
    assert got[0] == text, data
    assert got[1] == (text == data)
    if got[1]:
        assert got[0] is data
    if top_object:
        assert got[2] == bool(_find_sealed(document)), data
        for i, name in enumerate(NAMES):
            start, end = got[3][2 * i], got[3][2 * i + 1]
            member = name.decode()
            if member in document:
                assert got[0][start:end] == _json_bytes(document[member]), (data, name)
            else:
                assert (start, end) == (-1, -1)
    return True


# ------------------------------------------------------------------------------ the reader alone
@settings(max_examples=600, deadline=None)
@given(documents, st.sampled_from([(",", ":"), (", ", ": "), (",", " : ")]), st.booleans(), st.sampled_from([None, 1]))
def test_documents_however_written_read_as_python_reads_them(
    document: dict[str, Any], separators: tuple[str, str], ensure_ascii: bool, indent: int | None
) -> None:
    data = json.dumps(document, separators=separators, ensure_ascii=ensure_ascii, indent=indent).encode()
    check_agrees(data)
    canonical_form = _json_bytes(load_json_object(data))  # doubles as the reader reads them (float.__repr__)
    got = canonical(canonical_form, NAMES, True)
    if all(abs(v) < 10**18 for v in integers_in(document)):  # longer integers are left to Python
        assert got is not None, canonical_form
        assert got[1], canonical_form


@pytest.mark.parametrize("seed", range(4))
def test_hostile_texts_are_refused_or_read_as_python_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    answered = 0
    for _ in range(6000):
        data = hostile_bytes(rng)
        top_object = rng.random() < 0.7
        answered += check_agrees(data, top_object=top_object)
    assert answered > 300  # the generator reaches documents the native reader reads, not only refusals


@pytest.mark.parametrize(
    "special",
    [b'"', b"\\n", b"\\u0041", b"\\/", b"\x01", b"\x7f", "é".encode(), "€".encode(), "😀".encode(), b"\xc0\xaf",
     b"\xed\xa0\x80", b"\xff"],
)  # fmt: skip
def test_a_special_byte_at_every_place_of_the_eight_byte_words_reads_as_python_reads_it(special: bytes) -> None:
    """The string reader takes printable ASCII eight bytes at a time and skips a word's plain bytes up to its first
    special one: a special byte (the closing quote, an escape, a control or non-ASCII byte, broken UTF-8) at each
    offset within and across two words, after plain text and before more of it."""
    for before in range(0, 18):
        for after in (0, 1, 7, 8, 9):
            text = b"a" * before + special + b"b" * after
            for data in (b'{"name":"' + text + b'"}', b'{"' + text + b'":1,"name":2}'):
                check_agrees(data)
            if special != b'"':  # the reader must see the byte, or it would take what Python refuses
                answered = canonical(b'{"name":"' + text + b'"}', NAMES, True) is not None
                assert answered == (special not in (b"\x01", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff")), text


@pytest.mark.parametrize(
    "data",
    [
        b'{"email":"x","email":"y"}',
        b'{"email":"x","\\u0065mail":"y"}',  # the same name, spelt with an escape
        b'{"a":{"b":1,"\\u0062":2}}',
        b'{"a":"\\ud800"}',
        b'{"\\udc00":1}',
        b'{"a":"\xed\xa0\x80"}',  # a surrogate in UTF-8
        b'{"a":"\xc0\xaf"}',  # overlong
        b'{"a":"\xf4\x90\x80\x80"}',  # beyond U+10FFFF
        b'{"a":NaN}',
        b'{"a":1e400}',
        b'{"a":"\x01"}',
        b'{"a":1}x',
        b'{"a":1,}',
        b"[1]",
        b'"text"',
        b'{"a":' + b"[" * 120 + b"]" * 120 + b"}",
        b'{"a":-0}',
        b'{"a":123456789012345678901234567890}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_what_the_native_reader_leaves_to_python(data: bytes) -> None:
    assert canonical(data, NAMES, True) is None


def test_a_large_object_with_one_duplicate_is_refused() -> None:
    members = b",".join(b'"k%d":%d' % (i, i) for i in range(3000))
    assert canonical(b"{" + members + b"}", (), True) is not None
    assert canonical(b"{" + members + b',"k1717":0}', (), True) is None


# ------------------------------------------------------------------------------ encrypt and decrypt, both paths
def lookup(ref: KeyRef) -> bytes | None:
    return DEK


def both_paths(call: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(native path's answer, Python path's answer); an exception is the answer (its type and message)."""
    answers = []
    for native in (True, False):
        monkeypatch.setattr(json_fields, "NATIVE", native)
        with fixed_nonces_for_vectors(bytes([n]) * 12 for n in range(1, 40)):
            try:
                answers.append(call())
            except EnvelopeError as exc:
                answers.append((type(exc), str(exc)))
    monkeypatch.setattr(json_fields, "NATIVE", True)
    return answers[0], answers[1]


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())
def test_encrypting_and_decrypting_write_the_same_bytes_on_both_paths(
    document: dict[str, Any], separators: tuple[str, str], ensure_ascii: bool
) -> None:
    monkeypatch = pytest.MonkeyPatch()
    try:
        data = json.dumps(document, separators=separators, ensure_ascii=ensure_ascii).encode()
        native, python = both_paths(lambda: encrypt_json_fields(data, RULES, DEK, REF, CTX), monkeypatch)
        assert native == python
        if isinstance(native, bytes):
            for erased in ("null", "raise"):
                for keys in (lookup, lambda ref: None):
                    opened = both_paths(
                        functools.partial(
                            decrypt_json_fields, native, keys, CTX, expect_encrypted=RULES, on_erased=erased
                        ),
                        monkeypatch,
                    )
                    assert opened[0] == opened[1]
            wrong = both_paths(
                lambda: decrypt_json_fields(native, lambda ref: OTHER_DEK, CTX, expect_encrypted=RULES), monkeypatch
            )
            assert wrong[0] == wrong[1]
    finally:
        monkeypatch.undo()


def sealed(name: str, plaintext: bytes, ctx: RecordContext = CTX) -> str:
    """An ``sr1:`` string for the member ``name`` whose plaintext is exactly ``plaintext`` (a broken producer's)."""
    from strongroom.envelope.codec import seal

    return FIELD_PREFIX + __import__("base64").b64encode(seal(plaintext, DEK, REF, ctx, f"$.{name}")).decode()


@pytest.mark.parametrize(
    "data",
    [
        b'{"email":"alice@example.com","email":"SEALED"}',  # a duplicate that would hide plaintext
        b'{"email":"alice@example.com"}',  # plaintext at a rule field
        b'{"email":"sr1:%%%"}',  # not base64
        b'{"email":"sr1:QUJD"}',  # base64, not an envelope
        b'{"email":"\\u0073r1:QUJD"}',  # an escaped spelling
        b'{"note":"sr1:QUJD","name":1}',  # a stray envelope (encrypting refuses it)
        b'{"email":"SEALED", "name":"SEALED"}',  # not canonical: the Python path reads it
        b'{"email":"SEALED","name":"x"}',
        b'{"name":"SEALED","note":"\\ud800"}',
        b'{"name":"SEALED_SPACED"}',  # a plaintext that is not canonical JSON
        b'{"name":"SEALED_DUPLICATE"}',  # a plaintext object naming a member twice
        b'{"name":"SEALED_BAD"}',  # a plaintext that is not JSON
    ],
)
def test_hostile_documents_get_the_same_answer_on_both_paths(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    data = (
        data.replace(b"SEALED_SPACED", sealed("name", b'{"a" : 1}').encode())
        .replace(b"SEALED_DUPLICATE", sealed("name", b'{"a":1,"a":2}').encode())
        .replace(b"SEALED_BAD", sealed("name", b"{not json").encode())
    )
    data = data.replace(b'"email":"SEALED"', b'"email":"' + sealed("email", b'"x@example.com"').encode() + b'"')
    data = data.replace(b'"name":"SEALED"', b'"name":"' + sealed("name", b'"Alice"').encode() + b'"')
    encrypting = both_paths(lambda: encrypt_json_fields(data, RULES, DEK, REF, CTX), monkeypatch)
    assert encrypting[0] == encrypting[1]
    decrypting = both_paths(lambda: decrypt_json_fields(data, lookup, CTX, expect_encrypted=RULES), monkeypatch)
    assert decrypting[0] == decrypting[1]
    spaced = b'{"name":' + json.dumps(sealed("name", b'{"a" : 1}')).encode() + b"}"
    assert decrypt_json_fields(spaced, lookup, CTX, expect_encrypted=RULES) == b'{"name":{"a":1}}'


def test_well_formed_documents_take_the_native_path_both_ways() -> None:
    """The differential tests above would pass if the native path always stepped aside: it must not, for the
    documents strongroom meets most (a compact document going in, its canonical sealed form coming back)."""
    from strongroom.envelope.jsonpath import FieldRules

    rules = FieldRules(RULES)
    data = b'{"name":"Alice","email":"alice@example.com","n":[1,2.5,{"a":null}],"\xc3\xa9 x":true}'
    sealed_value = json_fields._seal_members(data, rules, DEK, REF, CTX, None)
    assert sealed_value is not None
    assert len(json_fields._find_sealed(load_json_object(sealed_value))) == 3
    assert json_fields._open_members(sealed_value, rules, lookup, CTX, None, "null") == data
