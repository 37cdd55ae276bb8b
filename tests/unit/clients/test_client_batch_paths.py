"""The producer's and consumer's batch paths write and read exactly what the per-record paths do.

Real envelopes and real confluent-kafka ``Message`` objects; the key source is an in-memory stand-in
for the key table's lookup contract (as in test_client_sealing.py). The consumer's native opener
(``crypto/_gcm.c``, built by ``make``) is held to the Python path's answers: its AES-256-GCM against
``cryptography``'s (frozen vectors, random inputs tampered or not), and ``open_simple`` with the native
loop against ``open_simple`` without it over random batches of every record shape.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from strongroom.clients import batch_open, batch_seal
from strongroom.clients.batch_open import KeyCiphers, fast_message, open_simple, open_target
from strongroom.clients.batch_seal import ENVELOPE_OVERHEAD, SealItem, SubjectSealers
from strongroom.clients.records import DecryptedMessage, MessageStatus
from strongroom.clients.sealing import Opened, RuleCodec
from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import (
    AadProfile,
    RecordContext,
    SubjectErased,
    SubjectKeyRef,
    decrypt_value,
    json_fields,
    parse,
    seal,
)
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.table import SubjectKey
from strongroom.rules import TopicRule

RULE = TopicRule(topic="orders")
PORTABLE_RULE = TopicRule.model_validate({"topic": "orders", "aad_profile": "portable"})


def subject_key(subject: str) -> SubjectKey:
    return SubjectKey(subject=subject, key_id=os.urandom(16), key=os.urandom(32))


def item(subject: str, value: bytes, profile: AadProfile = AadProfile.TOPIC, topic: str = "orders.enc") -> SealItem:
    return SealItem(topic, profile, subject, subject.encode(), value)


# ------------------------------------------------------------------------------------------ sealing
@pytest.mark.parametrize("profile", [AadProfile.TOPIC, AadProfile.PORTABLE])
def test_batch_seal_writes_byte_for_byte_what_the_envelope_codec_writes(profile: AadProfile) -> None:
    keys = {s: subject_key(s) for s in ("c-1", "c-2", "é-3")}
    items = [item(s, b'{"n": %d}' % i, profile) for i, s in enumerate(["c-1", "c-2", "c-1", "é-3"])]
    nonces = [bytes([i]) * 12 for i in range(1, len(items) + 1)]
    sealers = SubjectSealers()
    with fixed_nonces_for_vectors(nonces):
        batch = sealers.seal(items, keys, sealers.notices())
    with fixed_nonces_for_vectors(nonces):
        expected = [
            seal(it.value, keys[it.subject].key, SubjectKeyRef(keys[it.subject].key_id),
                 RecordContext(it.out_topic, it.subject_bytes, profile))
            for it in items
        ]  # fmt: skip
    assert batch == expected
    assert all(len(env) == len(it.value) + ENVELOPE_OVERHEAD for env, it in zip(batch, items, strict=True))


def test_batch_seal_draws_a_fresh_random_nonce_per_record_and_each_opens() -> None:
    key = subject_key("c-1")
    items = [item("c-1", b"same value")] * 50
    sealers = SubjectSealers()
    envelopes = sealers.seal(items, {"c-1": key}, sealers.notices())
    assert len({env[21:33] for env in envelopes}) == 50
    ctx = RecordContext("orders.enc", b"c-1")
    assert {decrypt_value(env, lambda _: key.key, ctx) for env in envelopes} == {b"same value"}
    with pytest.raises(Exception, match="does not belong"):  # bound to topic and subject
        decrypt_value(envelopes[0], lambda _: key.key, RecordContext("other.enc", b"c-1"))


def test_sealers_are_an_lru_bounded_at_capacity() -> None:
    keys = {f"c-{i}": subject_key(f"c-{i}") for i in range(5)}
    sealers = SubjectSealers(capacity=3)
    for subject in ["c-0", "c-1", "c-2", "c-0", "c-3", "c-4"]:
        sealers.seal([item(subject, b"v")], keys, sealers.notices())
    assert len(sealers) == 3
    # c-0 was used again after c-1 and c-2, so c-1 and c-2 went first
    sealers.seal([item("c-0", b"v")], keys, sealers.notices())
    assert sealers.counters["hits"] == 2


def test_an_erasure_notice_empties_the_sealers_and_keys_fetched_before_it_are_not_kept() -> None:
    keys = {"c-1": subject_key("c-1")}
    sealers = SubjectSealers()
    before = sealers.notices()
    sealers.seal([item("c-1", b"v")], keys, before)
    assert len(sealers) == 1
    sealers.on_erasure(ErasureNotice(subjects=("c-1",)))
    assert len(sealers) == 0
    sealers.seal([item("c-1", b"v")], keys, before)  # keys read before the notice: sealed, not cached
    assert len(sealers) == 0


def test_a_new_key_for_a_subject_replaces_its_prepared_sealer() -> None:
    old, new = subject_key("c-1"), subject_key("c-1")
    sealers = SubjectSealers()
    sealers.seal([item("c-1", b"v")], {"c-1": old}, sealers.notices())
    (envelope,) = sealers.seal([item("c-1", b"v")], {"c-1": new}, sealers.notices())
    assert envelope[4:20] == new.key_id
    assert decrypt_value(envelope, lambda _: new.key, RecordContext("orders.enc", b"c-1")) == b"v"


# ------------------------------------------------------------------------------------------ opening
class Keys:
    """The key table's contract for :class:`KeyCiphers`: key, None (not arrived) or an error."""

    def __init__(self, keys: dict[bytes, bytes]) -> None:
        self.keys = keys
        self.erased: set[bytes] = set()
        self.listeners: list[Callable[[ErasureNotice], None]] = []
        self.lookups = 0
        self.warmed: list[list[bytes]] = []

    def lookup(self, ref: SubjectKeyRef, subject: str) -> bytes | None:
        self.lookups += 1
        key_id = ref.key_id
        if key_id in self.erased:
            raise SubjectErased("erased")
        return self.keys.get(key_id)

    def warm(self, key_ids: Sequence[bytes]) -> int:
        self.warmed.append(list(key_ids))
        return 0

    def add_erasure_listener(self, listener: Callable[[ErasureNotice], None]) -> None:
        self.listeners.append(listener)


def test_a_consumers_ready_ciphers_and_openers_are_out_of_the_collectors_passes() -> None:
    """Key ids, ciphers, bytes and text: nothing for the cyclic collector to walk (``runtime.untracked``)."""
    keys = [subject_key(f"c-{i}") for i in range(100)]
    ciphers = KeyCiphers(Keys({k.key_id: k.key for k in keys}))
    target = open_target(("strongroom.enc", b"v1"), "orders.enc", openers=ciphers.openers)
    for key in keys:
        assert ciphers.load(key.key_id, key.subject) is not None
        assert target.opener(SubjectKeyRef(key.key_id).header(AadProfile.TOPIC), key.subject.encode()) is not None
    assert len(ciphers) == 100
    assert len(ciphers.openers) == 100
    assert not gc.is_tracked(ciphers.entries)
    assert not gc.is_tracked(ciphers.openers)


def sealed_message(codec: RuleCodec, key: SubjectKey, offset: int, value: bytes = b'{"a": 1}', **kw: Any) -> Message:
    envelope = codec.seal_value(value, "orders.enc", key.subject, key.key_id, key.key)
    headers = kw.pop("headers", codec.sealed_headers([("trace", b"t1")]))
    return Message(topic="orders.enc", partition=0, offset=offset, key=key.subject.encode(), value=envelope,
                   headers=headers, timestamp=(1, 1000 + offset), leader_epoch=4, **kw)  # fmt: skip


def opener(codec: RuleCodec, keys: Keys) -> tuple[KeyCiphers, Callable[[str], Any]]:
    target = open_target(codec.marker, "orders.enc")
    return KeyCiphers(keys), lambda topic: target if topic == "orders.enc" else None


@pytest.mark.parametrize("rule", [RULE, PORTABLE_RULE])
def test_open_simple_gives_the_message_the_per_record_path_gives(rule: TopicRule) -> None:
    codec = RuleCodec(rule)
    key = subject_key("c-1")
    msgs = [sealed_message(codec, key, offset) for offset in range(3)]
    keys = Keys({key.key_id: key.key})
    ciphers, target_of = opener(codec, keys)
    out: list[DecryptedMessage] = []
    finished: dict[tuple[str, int], int] = {}
    assert open_simple(msgs, target_of, ciphers, out, finished) == 3
    assert finished == {("orders.enc", 0): 2}
    assert keys.lookups == 1  # one table lookup for the key, then its cipher is ready
    for msg, got in zip(msgs, out, strict=True):
        outcome = codec.open(msg.key(), msg.value(), msg.headers(), "orders.enc", lambda ref, s: key.key)
        assert isinstance(outcome, Opened)
        ts_type, ts = msg.timestamp()
        expected = DecryptedMessage(
            topic="orders.enc", partition=0, offset=msg.offset(), key=b"c-1", value=outcome.value,
            headers=outcome.headers, timestamp=ts, timestamp_type=ts_type, leader_epoch=4,
            status=MessageStatus.DECRYPTED, subject="c-1", erased_fields=False,
        )  # fmt: skip
        assert got == expected
        assert got.value == b'{"a": 1}'
        assert got.headers == [("trace", b"t1")]


def test_fast_message_equals_the_constructor() -> None:
    msg = Message(topic="t", partition=2, offset=9, key=None, value=b"x", timestamp=(0, -1))
    built = fast_message(msg, b"plain", [("h", None)], "s")
    assert built == DecryptedMessage("t", 2, 9, None, b"plain", [("h", None)], None, 0, None,
                                     MessageStatus.DECRYPTED, "s", False)  # fmt: skip
    with pytest.raises(AttributeError):
        built.value = b"other"  # type: ignore[misc]


def tampered(msg: Message) -> Message:
    value = bytearray(msg.value() or b"")
    value[-1] ^= 1
    return Message(topic=msg.topic(), partition=0, offset=msg.offset(), key=msg.key(), value=bytes(value),
                   headers=msg.headers(), timestamp=msg.timestamp())  # fmt: skip


def like(msg: Message, **changes: Any) -> Message:
    """``msg`` with some of its parts replaced."""
    parts = {"topic": msg.topic(), "partition": 0, "offset": msg.offset(), "key": msg.key(), "value": msg.value(),
             "headers": msg.headers()}  # fmt: skip
    return Message(**{**parts, **changes})


def variants(codec: RuleCodec, key: SubjectKey) -> dict[str, Message]:
    good = sealed_message(codec, key, 1)
    envelope = good.value() or b""
    return {
        "no marker": like(good, headers=[("trace", b"t1")]),
        "marker not first": like(good, headers=[("trace", b"t1"), codec.marker]),
        "second marker": like(good, headers=[codec.marker, (codec.marker[0], b"\x01\x02")]),
        "fields marker": like(good, headers=[(codec.marker[0], b"\x01\x02")]),
        "tampered": like(good, value=envelope[:-1] + bytes([envelope[-1] ^ 1])),
        "null key": like(good, key=None),
        "other subject": like(good, key=b"c-2"),
        "not an envelope": like(good, value=b'{"a": 1}'),
        "unknown profile": like(good, value=envelope[:20] + b"\x07" + envelope[21:]),
        "other topic": like(good, topic="else"),
    }


@pytest.mark.parametrize("shape", list(variants(RuleCodec(RULE), subject_key("c-1"))))
def test_open_simple_stops_at_the_first_record_of_any_other_shape(shape: str) -> None:
    codec = RuleCodec(RULE)
    key = subject_key("c-1")
    first = sealed_message(codec, key, 0)
    odd = variants(codec, key)[shape]
    last = sealed_message(codec, key, 2)
    ciphers, target_of = opener(codec, Keys({key.key_id: key.key}))
    out: list[DecryptedMessage] = []
    finished: dict[tuple[str, int], int] = {}
    assert open_simple([first, odd, last], target_of, ciphers, out, finished) == 1
    assert [m.offset for m in out] == [0]
    assert finished == {("orders.enc", 0): 0}


@pytest.mark.parametrize("state", ["pending", "erased"])
def test_open_simple_leaves_keys_the_table_does_not_simply_have_to_the_per_record_path(state: str) -> None:
    codec = RuleCodec(RULE)
    key = subject_key("c-1")
    keys = Keys({} if state == "pending" else {key.key_id: key.key})
    if state == "erased":
        keys.erased.add(key.key_id)
    ciphers, target_of = opener(codec, keys)
    out: list[DecryptedMessage] = []
    assert open_simple([sealed_message(codec, key, 0)], target_of, ciphers, out, {}) == 0
    assert out == []
    assert len(ciphers) == 0
    assert keys.warmed == [[key.key_id]]  # the batch's keys are loaded together first


def test_key_ciphers_forget_everything_on_an_erasure_notice_and_stay_bounded() -> None:
    codec = RuleCodec(RULE)
    subjects = [subject_key(f"c-{i}") for i in range(4)]
    keys = Keys({k.key_id: k.key for k in subjects})
    ciphers = KeyCiphers(keys, capacity=2)
    target = open_target(codec.marker, "orders.enc")
    out: list[DecryptedMessage] = []
    msgs = [sealed_message(codec, k, i) for i, k in enumerate(subjects)]
    assert open_simple(msgs, lambda _: target, ciphers, out, {}) == 4
    assert len(ciphers) == 2
    (listener,) = keys.listeners
    keys.erased.add(subjects[3].key_id)
    listener(ErasureNotice(key_ids=(subjects[3].key_id,)))
    assert len(ciphers) == 0
    assert open_simple([msgs[3]], lambda _: target, ciphers, out, {}) == 0  # erased: not opened from a cache


def test_openers_are_built_once_per_key_and_subject_hold_no_key_and_stay_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("strongroom.clients.batch_open.MAX_OPENERS", 3)
    codec = RuleCodec(RULE)
    subjects = [subject_key(f"c-{i}") for i in range(5)]
    keys = Keys({k.key_id: k.key for k in subjects})
    ciphers = KeyCiphers(keys)
    target = open_target(codec.marker, "orders.enc", None, ciphers.openers)
    msgs = [sealed_message(codec, k, i) for i, k in enumerate(subjects[:2] * 3)]
    out: list[DecryptedMessage] = []
    assert open_simple(msgs, lambda _: target, ciphers, out, {}) == 6
    assert [m.value for m in out] == [b'{"a": 1}'] * 6
    assert len(target.openers) == 2  # one per (envelope header, record key, bound topic)
    # the next consumer of the table (a restart, a new group member) finds them built
    assert open_target(codec.marker, "orders.enc", None, ciphers.openers).openers is ciphers.openers
    mirrored = open_target(codec.marker, "other.enc", None, ciphers.openers)  # bound to another topic
    assert open_simple(msgs[:1], lambda _: mirrored, ciphers, out, {}) == 0  # not under this topic's AAD
    assert len(ciphers.openers) == 3
    kept = b"".join(key_id + aad + subject.encode() for key_id, aad, subject in target.openers.values())
    assert not any(k.key in kept for k in subjects)  # the AAD and the key id, never the key
    more = [sealed_message(codec, k, 10 + i) for i, k in enumerate(subjects[2:])]
    assert open_simple(more, lambda _: target, ciphers, out, {}) == 3
    assert len(target.openers) <= 3
    not_utf8 = Message(topic="orders.enc", partition=0, offset=20, key=b"\xff", value=msgs[0].value(),
                       headers=msgs[0].headers(), timestamp=(1, 1))  # fmt: skip
    assert open_simple([not_utf8], lambda _: target, ciphers, out, {}) == 0  # the per-record path judges it
    assert not any(key == b"\xff" for _, key, _ in target.openers)


FIELDS_RULE = TopicRule.model_validate({"topic": "orders", "mode": "fields", "fields": ["$.email", "$.total"]})


def test_open_simple_opens_field_mode_records_as_the_codec_does_and_leaves_erased_fields_to_it() -> None:
    codec = RuleCodec(FIELDS_RULE)
    key, gone = subject_key("c-1"), subject_key("c-1")
    doc = b'{"id": 1, "email": "ann@example.com", "total": 1e16, "note": "\\u00e9"}'
    msgs = [sealed_message(codec, key, 0, doc), sealed_message(codec, gone, 1, doc)]
    keys = Keys({key.key_id: key.key, gone.key_id: gone.key})
    keys.erased.add(gone.key_id)
    target = open_target(codec.marker, "orders.enc", codec)
    out: list[DecryptedMessage] = []
    finished: dict[tuple[str, int], int] = {}
    assert open_simple(msgs, lambda _: target, KeyCiphers(keys), out, finished) == 1
    assert out[0].value == b'{"id":1,"email":"ann@example.com","total":1e+16,"note":"\xc3\xa9"}'
    assert out[0].headers == [("trace", b"t1")]
    assert finished == {("orders.enc", 0): 0}


FIELD_DOCS = [b'{"id": %d, "email": "ann@example.com", "total": 1e16, "note": "\\u00e9"}' % i for i in range(4)]


def test_the_native_field_opener_opens_what_the_codec_opens_and_steps_aside_for_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    codec = RuleCodec(FIELDS_RULE)
    one, two, later, gone = (subject_key(s) for s in ("c-1", "c-2", "c-3", "c-4"))
    msgs = [
        sealed_message(codec, k, i, doc)
        for i, (k, doc) in enumerate(zip((one, two, one, two), FIELD_DOCS, strict=True))
    ]
    msgs += [sealed_message(codec, later, 4, FIELD_DOCS[0]), sealed_message(codec, gone, 5, FIELD_DOCS[0])]
    calls: list[object] = []
    native_open = batch_open.open_fields

    def counted(*args: Any) -> Any:
        calls.append(answer := native_open(*args))
        return answer

    def run(native: bool) -> tuple[int, list[DecryptedMessage]]:
        keys = Keys({one.key_id: one.key, two.key_id: two.key, gone.key_id: gone.key})
        keys.erased.add(gone.key_id)
        target = open_target(codec.marker, "orders.enc", codec)
        if not native:
            target = dataclasses.replace(target, fields_native=None)
        out: list[DecryptedMessage] = []
        stop = open_simple(msgs, lambda _: target, KeyCiphers(keys), out, {})
        return stop, out

    with monkeypatch.context() as patched:
        patched.setattr(batch_open, "open_fields", counted)
        natively = run(native=True)
        in_c = list(calls)
        calls.clear()
        patched.setattr(batch_open, "open_run", None)
        in_python = run(native=True)
    assert natively == in_python == run(native=False)
    assert natively[0] == 4  # the pending key's record goes to the per-record path
    assert [m.value for m in natively[1]] == [
        b'{"id":%d,"email":"ann@example.com","total":1e+16,"note":"\xc3\xa9"}' % i for i in range(4)
    ]
    # Each key is named once, then its record opened; with the native loop the two records of known keys that
    # follow are opened in C (not counted here); the pending key is named, then left to the codec.
    assert [type(c).__name__ for c in in_c] == ["tuple", "bytes", "tuple", "bytes", "tuple"]
    assert [type(c).__name__ for c in calls] == ["tuple", "bytes", "tuple", "bytes", "bytes", "bytes", "tuple"]


def test_a_field_rule_whose_subject_is_not_the_record_key_is_not_opened_natively() -> None:
    rule = TopicRule.model_validate(
        {"topic": "orders", "mode": "fields", "fields": ["$.email"], "subject": {"source": "json", "path": "$.id"}}
    )
    assert open_target(RuleCodec(rule).marker, "orders.enc", RuleCodec(rule)).fields_native is None
    assert open_target(RuleCodec(FIELDS_RULE).marker, "orders.enc", RuleCodec(FIELDS_RULE)).fields_native is not None
    nested = TopicRule.model_validate({"topic": "orders", "mode": "fields", "fields": ["$.a.email"]})
    assert open_target(RuleCodec(nested).marker, "orders.enc", RuleCodec(nested)).fields_native is None


def test_sealers_seal_field_records_natively_as_the_codec_does() -> None:
    codec = RuleCodec(FIELDS_RULE)
    members = json_fields.native_members(codec.fields)
    keys = {s: subject_key(s) for s in ("c-1", "c-2")}
    items = [item(s, doc) for s, doc in zip(("c-1", "c-2", "c-1", "c-2"), FIELD_DOCS, strict=True)]
    items.append(item("c-1", b'{"email": "sr1:QUJD"}'))  # looks sealed: the codec judges it
    sealers = SubjectSealers()
    sealed = sealers.seal_fields(items, [members] * 4 + [members], keys, sealers.notices())
    assert sealed[4] is None
    lookup = {k.key_id: k.key for k in keys.values()}
    for it, envelope in zip(items[:4], sealed[:4], strict=True):
        assert envelope is not None
        assert b"ann@example.com" not in envelope
        outcome = codec.open(it.subject.encode(), envelope, codec.sealed_headers([]), "orders.enc",
                             lambda ref, _: lookup[ref.key_id])  # fmt: skip
        assert isinstance(outcome, Opened)
        assert outcome.value == codec.open(
            it.subject.encode(),
            codec.seal_value(it.value, "orders.enc", it.subject, keys[it.subject].key_id, keys[it.subject].key),
            codec.sealed_headers([]), "orders.enc", lambda ref, _: lookup[ref.key_id],
        ).value  # fmt: skip
    assert sealers.seal_fields(items[:1], [None], keys, sealers.notices()) == [None]  # not top-level members
    with fixed_nonces_for_vectors([bytes(12)] * 4):  # the vectors' fixed nonces: the codec draws them
        assert sealers.seal_fields(items[:2], [members] * 2, keys, sealers.notices()) == [None, None]


def test_the_project_build_makes_the_native_field_sealer() -> None:
    assert batch_seal.NATIVE, "strongroom/crypto/_gcm.so is missing: `make` builds it (needs gcc and libssl-dev)"
    assert isinstance(batch_seal.build_sealer(subject_key("c-1"), "t", AadProfile.TOPIC, b"c-1").cipher, batch_open.Gcm)


# ------------------------------------------------------------------------------------------ the native opener
NATIVE_VECTORS = sorted((Path(__file__).parents[2] / "compat" / "vectors").glob("whole-value-*.json"))


def test_the_project_build_makes_the_native_opener() -> None:
    assert batch_open.NATIVE, "strongroom/crypto/_gcm.so is missing: `make` builds it (needs gcc and libssl-dev)"
    assert isinstance(batch_open.ready_cipher(os.urandom(32)), batch_open.Gcm)


# ------------------------------------------------------------------------------------------ the cipher
@pytest.mark.parametrize("path", NATIVE_VECTORS, ids=[p.stem for p in NATIVE_VECTORS])
def test_gcm_opens_every_frozen_whole_value_vector(path: Path) -> None:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    parsed = parse(bytes.fromhex(vector["envelope_hex"]))
    dek, aad = bytes.fromhex(vector["dek_hex"]), bytes.fromhex(vector["aad_hex"])
    plain = batch_open.Gcm(dek).decrypt(parsed.nonce, parsed.ciphertext, aad)
    assert plain == bytes.fromhex(vector["plaintext_hex"])
    with pytest.raises(InvalidTag):
        batch_open.Gcm(dek).decrypt(parsed.nonce, parsed.ciphertext, aad + b"\x00")


def _answer(cipher: Any, nonce: bytes, data: bytes, aad: bytes | None) -> bytes | str:
    try:
        return bytes(cipher.decrypt(nonce, data, aad))
    except InvalidTag:
        return "InvalidTag"


@settings(max_examples=300, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32),
    nonce=st.binary(min_size=12, max_size=12),
    plain=st.binary(max_size=2100),
    aad=st.none() | st.binary(max_size=300),
    tamper=st.sampled_from(["none", "data", "tag", "nonce", "aad", "truncate", "short"]),
    flip=st.integers(min_value=0, max_value=7),
)
def test_gcm_answers_as_cryptography_does(
    key: bytes, nonce: bytes, plain: bytes, aad: bytes | None, tamper: str, flip: int
) -> None:
    sealed = AESGCM(key).encrypt(nonce, plain, aad)
    data, seen_nonce, seen_aad = bytearray(sealed), nonce, aad
    if tamper == "data" and plain:
        data[len(plain) // 2] ^= 1 << flip
    elif tamper == "tag":
        data[-1 - flip] ^= 1
    elif tamper == "nonce":
        seen_nonce = bytes([nonce[0] ^ (1 << flip)]) + nonce[1:]
    elif tamper == "aad":
        seen_aad = (aad or b"") + b"x"
    elif tamper == "truncate":
        data = data[:-1]
    elif tamper == "short":
        data = data[: flip + 8]
    ours, theirs = batch_open.Gcm(key), AESGCM(key)
    expected = _answer(theirs, seen_nonce, bytes(data), seen_aad)
    assert _answer(ours, seen_nonce, bytes(data), seen_aad) == expected
    assert _answer(ours, seen_nonce, memoryview(bytes(data)), seen_aad) == expected  # type: ignore[arg-type]
    if tamper == "none":
        assert expected == plain


def test_gcm_refuses_a_wrong_key_or_nonce_size_and_shows_no_key() -> None:
    key = os.urandom(32)
    for size in (0, 16, 24, 31, 33):
        with pytest.raises(ValueError, match="32 bytes"):
            batch_open.Gcm(os.urandom(size))
    with pytest.raises(ValueError, match="12 bytes"):
        batch_open.Gcm(key).decrypt(os.urandom(16), b"\x00" * 32, None)
    cipher = batch_open.Gcm(key)
    assert key.hex() not in repr(cipher)
    assert not hasattr(cipher, "__dict__")


# ------------------------------------------------------------------------------------------ the loop
SHAPES = [*variants(RuleCodec(RULE), subject_key("c-1")), "good", "good other subject", "good without a timestamp",
          "pending key", "erased key"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(shapes=st.lists(st.sampled_from(SHAPES), min_size=1, max_size=12), warm=st.booleans())
def test_open_simple_gives_the_same_answer_with_and_without_the_native_loop(shapes: list[str], warm: bool) -> None:
    codec = RuleCodec(RULE)
    one, two, later, gone = (subject_key(s) for s in ("c-1", "c-2", "c-3", "c-4"))
    odd = variants(codec, one)
    batch: list[Message] = []
    for offset, shape in enumerate(shapes):
        if shape.startswith("good"):
            msg = sealed_message(codec, two if "other" in shape else one, offset, f'{{"n": {offset}}}'.encode())
            if "timestamp" in shape:
                msg = Message(topic=msg.topic(), partition=1, offset=offset, key=msg.key(), value=msg.value(),
                              headers=msg.headers(), timestamp=(0, -1))  # fmt: skip
            batch.append(msg)
        elif shape == "pending key":
            batch.append(sealed_message(codec, later, offset))
        elif shape == "erased key":
            batch.append(sealed_message(codec, gone, offset))
        else:
            msg = odd[shape]
            batch.append(Message(topic=msg.topic(), partition=0, offset=offset, key=msg.key(), value=msg.value(),
                                 headers=msg.headers(), timestamp=(1, 7), leader_epoch=offset))  # fmt: skip

    def run(native: bool) -> tuple[int, list[DecryptedMessage], dict[tuple[str, int], int], list[bytes]]:
        keys = Keys({one.key_id: one.key, two.key_id: two.key, gone.key_id: gone.key})
        keys.erased.add(gone.key_id)
        ciphers = KeyCiphers(keys)
        target = open_target(codec.marker, "orders.enc", None, ciphers.openers)
        if warm:  # the ciphers and openers already built by an earlier batch
            open_simple([sealed_message(codec, k, 99) for k in (one, two)], lambda _: target, ciphers, [], {})
        saved = batch_open.open_run
        batch_open.open_run = saved if native else None  # type: ignore[assignment]
        try:
            out: list[DecryptedMessage] = []
            finished: dict[tuple[str, int], int] = {}
            stop = open_simple(batch, lambda t: target if t == "orders.enc" else None, ciphers, out, finished)
        finally:
            batch_open.open_run = saved  # type: ignore[assignment]
        return stop, out, finished, list(ciphers.entries)

    assert run(native=True) == run(native=False)


def field_variants(codec: RuleCodec, key: SubjectKey) -> dict[str, Message]:
    good = sealed_message(codec, key, 1, FIELD_DOCS[1])
    sealed = json.loads(good.value() or b"")
    email = sealed["email"]
    return {
        "no marker": like(good, headers=[("trace", b"t1")]),
        "marker not first": like(good, headers=[("trace", b"t1"), codec.marker]),
        "second marker": like(good, headers=[codec.marker, (codec.marker[0], b"\x01\x01")]),
        "whole-value marker": like(good, headers=[RuleCodec(RULE).marker]),
        "tampered": like(good, value=json.dumps({**sealed, "email": email[:-6] + email[-6:].swapcase()}).encode()),
        "null key": like(good, key=None),
        "key not UTF-8": like(good, key=b"\xff"),
        "other subject": like(good, key=b"c-2"),
        "plaintext field": like(good, value=b'{"email":"ann@example.com"}'),
        "spaced document": like(good, value=json.dumps(sealed, separators=(", ", ": ")).encode()),
        "null value": like(good, value=None),
        "other topic": like(good, topic="else"),
    }


FIELD_SHAPES = [*field_variants(RuleCodec(FIELDS_RULE), subject_key("c-1")), "good", "good other subject",
                "good without rule fields", "pending key", "erased key"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(shapes=st.lists(st.sampled_from(FIELD_SHAPES), min_size=1, max_size=12), warm=st.booleans())
def test_field_records_get_the_same_answer_from_the_native_loop_the_python_loop_and_the_codec(
    shapes: list[str], warm: bool
) -> None:
    codec = RuleCodec(FIELDS_RULE)
    one, two, later, gone = (subject_key(s) for s in ("c-1", "c-2", "c-3", "c-4"))
    odd = field_variants(codec, one)
    batch: list[Message] = []
    for offset, shape in enumerate(shapes):
        if shape.startswith("good"):
            doc = b'{"n":%d}' % offset if "without" in shape else FIELD_DOCS[offset % 4]
            batch.append(sealed_message(codec, two if "other" in shape else one, offset, doc))
        elif shape in ("pending key", "erased key"):
            batch.append(sealed_message(codec, later if shape == "pending key" else gone, offset, FIELD_DOCS[0]))
        else:
            msg = odd[shape]
            batch.append(Message(topic=msg.topic(), partition=0, offset=offset, key=msg.key(), value=msg.value(),
                                 headers=msg.headers(), timestamp=(1, 7), leader_epoch=offset))  # fmt: skip

    def run(loop: str) -> tuple[int, list[DecryptedMessage], dict[tuple[str, int], int]]:
        keys = Keys({one.key_id: one.key, two.key_id: two.key, gone.key_id: gone.key})
        keys.erased.add(gone.key_id)
        ciphers = KeyCiphers(keys)
        target = open_target(codec.marker, "orders.enc", codec, ciphers.openers)
        if loop == "codec":
            target = dataclasses.replace(target, fields_native=None)
        target_of = lambda t: target if t == "orders.enc" else None  # noqa: E731
        if warm:  # the ciphers already loaded by an earlier batch
            open_simple([sealed_message(codec, k, 99, FIELD_DOCS[0]) for k in (one, two)], target_of, ciphers, [], {})
        saved = batch_open.open_run
        batch_open.open_run = saved if loop == "native" else None  # type: ignore[assignment]
        try:
            out: list[DecryptedMessage] = []
            finished: dict[tuple[str, int], int] = {}
            stop = open_simple(batch, target_of, ciphers, out, finished)
        finally:
            batch_open.open_run = saved  # type: ignore[assignment]
        return stop, out, finished

    assert run("native") == run("python") == run("codec")
