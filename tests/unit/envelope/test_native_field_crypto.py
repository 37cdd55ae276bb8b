"""Field mode's native sealer and opener (``seal_fields`` / ``open_fields`` of crypto/_gcm.c) held to the Python
path of json_fields (issue 18).

Either may answer None for anything (the Python path then judges the record); when one answers, it must be what
the pure Python path writes, byte for byte, with the same nonces: the same envelopes, the same AAD (topic,
subject, field path), the same canonical text. ``open_fields`` must never open what that path refuses (a tag
that does not verify, another subject or topic, plaintext at a rule field, a non-canonical spelling), and names
the first key it lacks in rule order, as that path looks keys up.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st
from json_cases import documents, hostile_bytes, integers_in

from strongroom.clients.batch_seal import build_sealer
from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import FIELD_PREFIX, AadProfile, RecordContext, SubjectKeyRef, json_fields, parse, seal
from strongroom.envelope.ids import AAD_LABEL
from strongroom.envelope.json_fields import decrypt_json_fields, encrypt_json_fields, native_members
from strongroom.envelope.jsonpath import FieldRules
from strongroom.errors import EnvelopeError
from strongroom.keys.table import SubjectKey

_gcm = pytest.importorskip("strongroom.crypto._gcm")
Gcm, seal_fields, open_fields = _gcm.Gcm, _gcm.seal_fields, _gcm.open_fields

TOPIC, SUBJECT = "customers.enc", "customer-7"
KEY = SubjectKey(SUBJECT, bytes(range(16)), bytes(range(32)))
OTHER = SubjectKey(SUBJECT, bytes(range(1, 17)), bytes(range(1, 33)))
RULES = FieldRules(["$.name", "$.email", "$.address", '$["é x"]'])
MEMBERS = native_members(RULES)
_REFUSED = "refused"


def test_rules_of_top_level_members_have_native_members_and_others_do_not() -> None:
    assert MEMBERS is not None
    assert MEMBERS.names == (b"name", b"email", b"address", "é x".encode())
    assert MEMBERS.aad_suffixes[1] == b"\x00\x07$.email"
    assert native_members(FieldRules(["$.a.b"])) is None
    assert native_members(FieldRules(["$.a[*]"])) is None


def topic_parts(topic: str = TOPIC) -> tuple[bytes, ...]:
    """What a consumer of ``topic`` passes (batch_open.open_target): per AAD profile id, the bound topic part."""
    parts = [b""] * (max(AadProfile) + 1)
    parts[AadProfile.TOPIC] = len(topic.encode()).to_bytes(2, "big") + topic.encode()
    parts[AadProfile.PORTABLE] = b"\x00\x00"
    return tuple(parts)


@contextlib.contextmanager
def python_only() -> Iterator[None]:
    """json_fields without its native reader: the reference the native field crypto is held to."""
    with mock.patch.object(json_fields, "NATIVE", False):
        yield


def native_seal(data: bytes, nonces: list[bytes], profile: AadProfile = AadProfile.TOPIC, key: SubjectKey = KEY) -> Any:
    sealer = build_sealer(key, TOPIC, profile, key.subject.encode())
    assert MEMBERS is not None
    assert isinstance(sealer.cipher, Gcm)
    return seal_fields(data, MEMBERS.names, MEMBERS.aad_suffixes, sealer.subject_aad, sealer.header, sealer.cipher,
                       b"".join(nonces))  # fmt: skip


def python_seal(data: bytes, nonces: list[bytes], profile: AadProfile = AadProfile.TOPIC) -> bytes | str:
    try:
        with python_only(), fixed_nonces_for_vectors(nonces):
            return encrypt_json_fields(
                data, RULES, KEY.key, SubjectKeyRef(KEY.key_id), RecordContext(TOPIC, SUBJECT.encode(), profile)
            )
    except (EnvelopeError, ValueError, RecursionError):
        return _REFUSED


def seal_agrees(data: bytes, profile: AadProfile = AadProfile.TOPIC) -> bool:
    """Assert the native sealing is None or the Python one; True when it answered."""
    nonces = [os.urandom(12) for _ in RULES.paths]
    got = native_seal(data, nonces, profile)
    if got is None:
        return False
    assert got == python_seal(data, nonces, profile), data
    return True


def lookup_of(*keys: SubjectKey) -> Any:
    table = {k.key_id: k.key for k in keys}
    return lambda ref: table.get(ref.key_id)


def native_open(data: bytes, *keys: SubjectKey, subject: str = SUBJECT, parts: tuple[bytes, ...] | None = None) -> Any:
    assert MEMBERS is not None
    ciphers = OrderedDict((k.key_id, Gcm(k.key)) for k in keys)
    return open_fields(data, MEMBERS.names, MEMBERS.aad_suffixes, AAD_LABEL, parts or topic_parts(), subject.encode(),
                       ciphers)  # fmt: skip


def python_open(data: bytes, *keys: SubjectKey, subject: str = SUBJECT, topic: str = TOPIC) -> bytes | str:
    try:
        with python_only():
            return decrypt_json_fields(
                data, lookup_of(*keys), RecordContext(topic, subject.encode()), expect_encrypted=RULES
            )
    except (EnvelopeError, InvalidTag, ValueError, RecursionError):
        return _REFUSED


def open_agrees(data: bytes, *keys: SubjectKey) -> bool:
    """Assert the native opening is None, the Python one, or the first missing key of a document that path
    would look up (with every key given, the same text); True when it opened."""
    got = native_open(data, *keys)
    if got is None:
        return False
    if isinstance(got, tuple):
        assert got[0] not in {k.key_id for k in keys}
        return open_agrees(data, *keys, SubjectKey(SUBJECT, got[0], KEY.key if got[0] == KEY.key_id else OTHER.key))
    assert got == python_open(data, *keys), data
    return True


# ------------------------------------------------------------------------------------------ the cipher
@settings(max_examples=200, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32),
    nonce=st.binary(min_size=12, max_size=12),
    plain=st.binary(max_size=2100),
    aad=st.none() | st.binary(max_size=300),
)
def test_gcm_seals_as_cryptography_does_and_switches_direction_freely(
    key: bytes, nonce: bytes, plain: bytes, aad: bytes | None
) -> None:
    ours, theirs = Gcm(key), AESGCM(key)
    sealed = theirs.encrypt(nonce, plain, aad)
    assert ours.encrypt(nonce, plain, aad) == sealed
    assert ours.decrypt(nonce, sealed, aad) == plain  # the same context, decrypting after sealing
    assert ours.encrypt(nonce, memoryview(plain), aad) == sealed  # type: ignore[arg-type]
    with pytest.raises(InvalidTag):
        ours.decrypt(nonce, sealed[:-1] + bytes([sealed[-1] ^ 1]), aad)
    assert ours.encrypt(nonce, plain, aad) == sealed  # and sealing after a failed opening
    with pytest.raises(ValueError, match="12 bytes"):
        ours.encrypt(nonce[:8], plain, aad)


# ------------------------------------------------------------------------------------------ sealing
@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans(), st.sampled_from(list(AadProfile)))
def test_sealing_writes_what_the_python_path_writes(
    document: dict[str, Any], separators: tuple[str, str], ensure_ascii: bool, profile: AadProfile
) -> None:
    data = json.dumps(document, separators=separators, ensure_ascii=ensure_ascii).encode()
    seal_agrees(data, profile)


@pytest.mark.parametrize("seed", range(3))
def test_sealing_hostile_texts_is_refused_or_what_the_python_path_writes(seed: int) -> None:
    rng = random.Random(seed)
    answered = 0
    for _ in range(3000):
        data = hostile_bytes(rng)
        answered += seal_agrees(data)
    assert answered > 100  # the generator reaches documents the native sealer writes, not only refusals


@pytest.mark.parametrize(
    "data",
    [
        b'{"email":"alice@example.com","email":"bob@example.com"}',  # a duplicate that would hide plaintext
        b'{"email":"alice@example.com","\\u0065mail":"x"}',
        b'{"email":"sr1:QUJD"}',  # looks sealed: only the Python path judges a re-run's envelope
        b'{"email":"\\u0073r1:QUJD"}',
        b'{"note":"sr1:QUJD","name":"x"}',  # a stray envelope
        b'{"name":"\\ud800"}',
        b'{"name":NaN}',
        b'{"name":1e400}',
        b"[1]",
        b'{"name":"x"} trailing',
    ],
)
def test_what_the_native_sealer_leaves_to_the_python_path(data: bytes) -> None:
    assert native_seal(data, [os.urandom(12) for _ in RULES.paths]) is None


def test_a_document_without_rule_fields_comes_back_as_it_came() -> None:
    data = b'{"id": 1, "note": "x"}'
    assert native_seal(data, [os.urandom(12)] * 4) is data
    assert python_seal(data, []) == data


def test_each_field_takes_its_own_nonce_in_rule_order_and_opens_under_its_own_path() -> None:
    nonces = [bytes([i]) * 12 for i in range(1, 5)]
    data = b'{"address":{"city":"Oslo"},"name":"Ann","email":"ann@example.com"}'
    sealed = native_seal(data, nonces)
    assert sealed == python_seal(data, nonces)
    document = json.loads(sealed)
    for member, nonce in (("name", nonces[0]), ("email", nonces[1]), ("address", nonces[2])):
        parsed = parse(base64.b64decode(document[member][len(FIELD_PREFIX) :]))
        assert parsed.nonce == nonce
    assert python_open(sealed, KEY) == b'{"address":{"city":"Oslo"},"name":"Ann","email":"ann@example.com"}'
    swapped = dict(document, name=document["email"], email=document["name"])  # another field's envelope
    assert python_open(json.dumps(swapped, separators=(",", ":")).encode(), KEY) == _REFUSED


def test_a_large_document_seals_and_opens() -> None:
    data = json.dumps({"name": "é" * 200_000, "n": list(range(2000)), "email": "x"}, separators=(",", ":")).encode()
    assert seal_agrees(data)
    sealed = native_seal(data, [os.urandom(12) for _ in RULES.paths])
    assert native_open(sealed, KEY) == json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False).encode()


def test_the_sealer_refuses_arguments_of_another_shape() -> None:
    assert MEMBERS is not None
    sealer = build_sealer(KEY, TOPIC, AadProfile.TOPIC, SUBJECT.encode())
    args = [b'{"name":"x"}', MEMBERS.names, MEMBERS.aad_suffixes, sealer.subject_aad, sealer.header, sealer.cipher]
    with pytest.raises(ValueError, match="12 bytes of nonce per name"):
        seal_fields(*args, os.urandom(12 * 3))
    with pytest.raises(ValueError, match="21-byte envelope header"):
        seal_fields(*args[:4], sealer.header[:-1], sealer.cipher, os.urandom(48))
    with pytest.raises(TypeError):
        seal_fields(*args[:5], AESGCM(KEY.key), os.urandom(48))


# ------------------------------------------------------------------------------------------ opening
def sealed_text(member: str, plaintext: bytes, key: SubjectKey = KEY, subject: str = SUBJECT, topic: str = TOPIC,
                profile: AadProfile = AadProfile.TOPIC) -> str:  # fmt: skip
    """``plaintext`` (as given: canonical or not) sealed as the field ``$.member`` (a field string)."""
    ctx = RecordContext(topic, subject.encode(), profile)
    envelope = seal(plaintext, key.key, SubjectKeyRef(key.key_id), ctx, f"$.{member}")
    return FIELD_PREFIX + base64.b64encode(envelope).decode()


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from(list(AadProfile)), st.booleans())
def test_opening_gives_what_the_python_path_gives(
    document: dict[str, Any], profile: AadProfile, two_keys: bool
) -> None:
    data = json.dumps(document).encode()
    sealed = python_seal(data, [os.urandom(12) for _ in RULES.paths], profile)
    if sealed == _REFUSED:
        return
    assert isinstance(sealed, bytes)
    if two_keys and "email" in document and sealed != data:  # one field under the subject's older key
        with python_only():
            sealed_document = json_fields.load_json_object(sealed)
            email = json_fields._json_bytes(json_fields.load_json_object(data)["email"])
            sealed_document["email"] = sealed_text("email", email, OTHER, profile=profile)
            sealed = json_fields._json_bytes(sealed_document)
    opened = open_agrees(sealed, KEY, OTHER)
    if sealed != data and all(abs(i) < 10**18 for i in integers_in(document)):
        assert opened  # what strongroom writes, the native opener opens (longer integers are left to Python)


def one_field(value: str) -> bytes:
    return b'{"id":1,"email":' + json.dumps(value).encode() + b',"n":2}'


GOOD = sealed_text("email", b'"ann@example.co"')  # 65 bytes of envelope: one "=" of padding
GOOD_BYTES = base64.b64decode(GOOD[len(FIELD_PREFIX) :])


def with_bytes(envelope: bytes) -> str:
    return FIELD_PREFIX + base64.b64encode(envelope).decode()


def padding_bits_set(text: str) -> str:
    """``text`` (base64 ending in "=") with an unused bit of its last digit set: the same bytes to a lax decoder."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = text.rstrip("=")
    assert body != text
    return body[:-1] + alphabet[alphabet.index(body[-1]) | 1] + text[len(body) :]


def flipped(index: int) -> str:
    raw = bytearray(GOOD_BYTES)
    raw[index] ^= 1
    return with_bytes(bytes(raw))


HOSTILE_OPENINGS: dict[str, bytes] = {
    "tag tampered": one_field(flipped(-1)),
    "ciphertext tampered": one_field(flipped(40)),
    "nonce tampered": one_field(flipped(25)),
    "profile byte changed": one_field(flipped(20)),
    "another subject's field": one_field(sealed_text("email", b'"ann@example.com"', subject="customer-8")),
    "another topic's field": one_field(sealed_text("email", b'"ann@example.com"', topic="other.enc")),
    "another field's envelope": one_field(sealed_text("name", b'"ann@example.com"')),
    "plaintext at a rule field": one_field("ann@example.com"),
    "a number at a rule field": b'{"email":7}',
    "padding bits set": one_field(padding_bits_set(GOOD)),
    "base64 without padding": one_field(GOOD.rstrip("=")),
    "base64 with a newline": b'{"email":"' + GOOD.encode() + b'\\n"}',
    "not base64": one_field("sr1:%%%%"),
    "base64 of too little": one_field("sr1:QUJD"),
    "another key kind": one_field(with_bytes(b"\xf5\x01\x01\x02" + GOOD_BYTES[4:])),
    "escaped prefix": b'{"email":"\\u0073' + GOOD[1:].encode() + b'"}',
    "spaced document": b'{"email": "' + GOOD.encode() + b'"}',
    "duplicate rule field": b'{"email":"' + GOOD.encode() + b'","email":"' + GOOD.encode() + b'"}',
    "plaintext not canonical": one_field(sealed_text("email", b'{"a" : 1.50}')),
    "plaintext duplicate members": one_field(sealed_text("email", b'{"a":1,"a":2}')),
    "plaintext not JSON": one_field(sealed_text("email", b"{not json")),
    "plaintext an envelope": one_field(sealed_text("email", b'"' + GOOD.encode() + b'"')),
    "truncated envelope": one_field(with_bytes(GOOD_BYTES[:-1])),
}


@pytest.mark.parametrize("case", list(HOSTILE_OPENINGS))
def test_hostile_documents_are_left_to_the_python_path_or_opened_as_it_opens_them(case: str) -> None:
    data = HOSTILE_OPENINGS[case]
    got = native_open(data, KEY, OTHER)
    if case == "plaintext an envelope":  # a string that only looks sealed, inside a field: opened as text
        assert got == python_open(data, KEY, OTHER) == b'{"id":1,"email":"' + GOOD.encode() + b'","n":2}'
    else:
        assert got is None, (case, got)
    assert open_agrees(data, KEY, OTHER) is (got is not None)


def test_a_tag_that_does_not_verify_is_never_opened_whatever_the_field() -> None:
    for index in range(len(GOOD_BYTES)):
        raw = bytearray(GOOD_BYTES)
        raw[index] ^= 0x80
        got = native_open(one_field(with_bytes(bytes(raw))), KEY, OTHER)
        if 4 <= index < 20:  # the key id: a key the consumer asks its table for (which has none: the Python path)
            assert got == (bytes(raw[4:20]),), index
        else:
            assert got is None, index


def test_the_first_key_missing_in_rule_order_is_named() -> None:
    name, email = sealed_text("name", b'"Ann"', OTHER), sealed_text("email", b'"a@x"', KEY)
    data = b'{"email":"' + email.encode() + b'","name":"' + name.encode() + b'"}'
    assert native_open(data) == (OTHER.key_id,)  # name comes first in the rules
    assert native_open(data, OTHER) == (KEY.key_id,)
    assert native_open(data, OTHER, KEY) == b'{"email":"a@x","name":"Ann"}' == python_open(data, OTHER, KEY)


def test_a_topic_the_consumer_does_not_bind_or_a_key_not_ready_is_left_to_the_python_path() -> None:
    data = one_field(GOOD)
    assert native_open(data, KEY) == b'{"id":1,"email":"ann@example.co","n":2}'
    assert native_open(data, KEY, parts=topic_parts("other.enc")) is None
    no_topic = list(topic_parts())
    no_topic[AadProfile.TOPIC] = b""
    assert native_open(data, KEY, parts=tuple(no_topic)) is None
    assert native_open(data, KEY, subject="customer-8") is None
    assert MEMBERS is not None
    not_ready = {KEY.key_id: AESGCM(KEY.key)}  # not the native cipher: the Python path opens it
    got = open_fields(data, MEMBERS.names, MEMBERS.aad_suffixes, AAD_LABEL, topic_parts(), SUBJECT.encode(), not_ready)
    assert got is None


def test_a_key_used_moves_to_the_end_of_the_ciphers() -> None:
    assert MEMBERS is not None
    ciphers = OrderedDict([(KEY.key_id, Gcm(KEY.key)), (OTHER.key_id, Gcm(OTHER.key))])
    open_fields(
        one_field(GOOD), MEMBERS.names, MEMBERS.aad_suffixes, AAD_LABEL, topic_parts(), SUBJECT.encode(), ciphers
    )
    assert list(ciphers) == [OTHER.key_id, KEY.key_id]


def test_the_opener_refuses_arguments_of_another_shape() -> None:
    assert MEMBERS is not None
    args = (one_field(GOOD), MEMBERS.names, MEMBERS.aad_suffixes)
    with pytest.raises(ValueError, match="label of at most 64"):
        open_fields(*args, b"x" * 65, topic_parts(), SUBJECT.encode(), {})
    with pytest.raises(ValueError, match="one path suffix per name"):
        open_fields(args[0], args[1], args[2][:-1], AAD_LABEL, topic_parts(), SUBJECT.encode(), {})


def test_the_sealed_field_never_shows_the_key_or_plaintext() -> None:
    nonces = [os.urandom(12) for _ in RULES.paths]
    sealed = native_seal(b'{"email":"ann@example.com"}', nonces)
    assert b"ann@example.com" not in sealed
    assert KEY.key not in base64.b64decode(json.loads(sealed)["email"][4:])


def test_portable_fields_open_under_any_topic() -> None:
    sealed = native_seal(b'{"email":"ann@example.com"}', [os.urandom(12) for _ in RULES.paths], AadProfile.PORTABLE)
    assert native_open(sealed, KEY, parts=topic_parts("anything.else")) == b'{"email":"ann@example.com"}'
    assert python_open(sealed, KEY, topic="anything.else") == b'{"email":"ann@example.com"}'
