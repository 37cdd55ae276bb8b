"""Fuzzing the parser and decryptors: only documented errors, never partial or altered plaintext.

``test_mutation_fuzz`` pushes well over 100,000 random and mutated inputs (seeded ``random``, so a
failure reproduces) through ``parse``, ``decrypt_value`` and ``decrypt_json_fields``. Mutations are
applied both to the raw bytes and *inside* the base64 of encrypted JSON fields, so the envelope
parser sees deep damage and not just broken JSON. The hypothesis tests add shrinking on top.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import time
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strongroom.envelope import (
    FIELD_PREFIX,
    AadProfile,
    KeyRef,
    RecordContext,
    SubjectKeyRef,
    WrappedDekRef,
    decrypt_json_fields,
    decrypt_value,
    encrypt_json_fields,
    parse,
    seal,
)
from strongroom.errors import EnvelopeError

SEED = 20261121
DEK = bytes(range(32))
CTX = RecordContext("orders", b"customer-1")
REFS: list[KeyRef] = [
    SubjectKeyRef(bytes(range(16))),
    WrappedDekRef("vault:orders-kek", b"vault:v1:" + base64.b64encode(bytes(48))),
    WrappedDekRef("aws:1234abcd-12ab-34cd-56ef-1234567890ab", bytes(range(184))),
]
DOC = {
    "id": 1,
    "email": "ann@example.com",
    "address": {"city": "Oslo", "zip": "0150"},
    "items": [{"sku": "a", "email": "x@y"}, {"sku": "b", "email": "z@w"}],
    "note": "日本語",
}
RULES = ["$.email", "$.address.city", "$.items[*].email"]
TARGET_INPUTS = 100_000


def lookup(ref: KeyRef) -> bytes | None:
    return DEK


def erased(ref: KeyRef) -> bytes | None:
    return None


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random mutation: bit flips, truncation, insertion, deletion, special bytes, splices."""
    buf = bytearray(data)
    choice = rng.randrange(8)
    if choice == 0 and buf:
        for _ in range(rng.randint(1, 3)):
            bit = rng.randrange(len(buf) * 8)
            buf[bit // 8] ^= 1 << (bit % 8)
    elif choice == 1:
        del buf[rng.randint(0, len(buf)) :]
    elif choice == 2:
        at = rng.randint(0, len(buf))
        buf[at:at] = rng.randbytes(rng.randint(1, 8))
    elif choice == 3 and buf:
        at = rng.randrange(len(buf))
        del buf[at : at + rng.randint(1, 8)]
    elif choice == 4 and buf:
        buf[rng.randrange(len(buf))] = rng.choice((0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0xF5, 0xFF))
    elif choice == 5 and len(buf) > 4:
        # rewrite a 16-bit length field somewhere near the header
        at = rng.randrange(min(len(buf) - 1, 64))
        buf[at : at + 2] = rng.randrange(0x10000).to_bytes(2, "big")
    elif choice == 6:
        return rng.randbytes(rng.randint(0, 80))
    else:
        at = rng.randint(0, len(buf))
        return bytes(buf[:at]) + bytes(buf[rng.randint(0, len(buf)) :])
    return bytes(buf)


def _check_binary(candidate: bytes, original: bytes, plaintext: bytes) -> None:
    with contextlib.suppress(EnvelopeError):
        parse(candidate)
    try:
        opened = decrypt_value(candidate, lookup, CTX)
    except EnvelopeError:
        return
    # Every byte of an envelope is authenticated: only the untouched envelope may open.
    assert candidate == original, "a mutated envelope decrypted"
    assert opened == plaintext


def _check_json(candidate: bytes, lookup_fn: Callable[[KeyRef], bytes | None]) -> None:
    try:
        opened = decrypt_json_fields(candidate, lookup_fn, CTX)
    except EnvelopeError:
        return
    document = json.loads(opened)
    assert isinstance(document, dict)
    assert FIELD_PREFIX not in opened.decode("utf-8"), "an encrypted field survived a successful decrypt"


def _mutate_inside_field(value: bytes, rng: random.Random) -> bytes:
    document = json.loads(value)
    strings: list[tuple[Any, Any]] = []
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        for slot, child in enumerate(node) if isinstance(node, list) else node.items():
            if isinstance(child, str) and child.startswith(FIELD_PREFIX):
                strings.append((node, slot))
            elif isinstance(child, dict | list):
                stack.append(child)
    node, slot = rng.choice(strings)
    raw = base64.b64decode(node[slot][len(FIELD_PREFIX) :])
    node[slot] = FIELD_PREFIX + base64.b64encode(mutate(raw, rng)).decode("ascii")
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def test_mutation_fuzz() -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    plaintexts = [b"", b"x", json.dumps(DOC).encode(), rng.randbytes(300)]
    envelopes = [
        (seal(p, DEK, ref, CTX.replace(profile=profile)), p)
        for p in plaintexts
        for ref in REFS
        for profile in AadProfile
    ]
    documents = [
        encrypt_json_fields(json.dumps(DOC).encode(), RULES, DEK, ref, CTX.replace(profile=profile))
        for ref in REFS
        for profile in AadProfile
    ]
    inputs = 0
    while inputs < TARGET_INPUTS:
        for original, plaintext in envelopes:
            candidate = original
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                candidate = mutate(candidate, rng)
            _check_binary(candidate, original, plaintext)
            inputs += 1
        for document in documents:
            _check_json(_mutate_inside_field(document, rng), lookup)
            _check_json(mutate(document, rng), erased if rng.random() < 0.2 else lookup)
            inputs += 2
    assert inputs >= TARGET_INPUTS
    assert time.monotonic() - started < 60, "the fuzz loop got slow; keep it to a few seconds"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_escape(data: bytes) -> None:
    for candidate in (data, b"\xf5\x01\x01" + data, b"\xf5\x01\x01\x02" + data):
        _check_binary(candidate, b"\x00never", b"")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(REFS))), st.binary(max_size=100), st.data())
def test_hypothesis_mutations(ref_index: int, plaintext: bytes, data: st.DataObject) -> None:
    original = seal(plaintext, DEK, REFS[ref_index], CTX)
    seed = data.draw(st.integers(min_value=0, max_value=2**32))
    candidate = mutate(original, random.Random(seed))
    _check_binary(candidate, original, plaintext)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=10), json_values, min_size=1, max_size=6),
    st.text(max_size=30),
    st.binary(max_size=40),
    st.sampled_from(list(AadProfile)),
)
def test_hypothesis_json_round_trip(document: dict[str, Any], topic: str, subject: bytes, profile: AadProfile) -> None:
    ctx = RecordContext(topic, subject, profile)
    rules = ['$["' + json.dumps(key)[1:-1] + '"]' for key in list(document)[:3]]
    value = json.dumps(document).encode()
    sealed = encrypt_json_fields(value, rules, DEK, REFS[0], ctx)
    assert json.loads(decrypt_json_fields(sealed, lookup, ctx)) == document
