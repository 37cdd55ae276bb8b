"""Sealing and opening one record under a rule: every outcome, with real envelopes and an in-memory key source."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest

from strongroom.clients.sealing import (
    Erased,
    Failed,
    KmsDown,
    Opened,
    Passthrough,
    Pending,
    RuleCodec,
    UnsupportedKeyRef,
)
from strongroom.envelope import (
    IntegrityError,
    RecordContext,
    SubjectErased,
    SubjectKeyRef,
    UnencryptedField,
    UnsupportedFormatVersion,
    WrappedDekRef,
    decrypt_value,
    parse,
    seal,
)
from strongroom.keys.errors import KeyTableClosed
from strongroom.kms.errors import KekDisabled, KmsUnavailable
from strongroom.rules import TopicRule

KEY_ID = bytes(range(16))
DEK = os.urandom(32)
VALUE_RULE = TopicRule(topic="orders")
FIELDS_RULE = TopicRule.model_validate({"topic": "orders", "mode": "fields", "fields": ["$.email", "$.address"]})
DOC = {"id": 1, "email": "ann@example.com", "address": {"city": "Lisbon"}, "total": 12.5}


class Keys:
    """The ``KeyTable.lookup`` contract: key, None (not arrived), SubjectErased, or a KMS/keys error."""

    def __init__(self, state: Any = "available") -> None:
        self.state = state
        self.calls: list[tuple[bytes, str]] = []

    def __call__(self, ref: SubjectKeyRef, subject: str) -> bytes | None:
        self.calls.append((ref.key_id, subject))
        if self.state == "available":
            return DEK
        if self.state == "pending":
            return None
        if self.state == "erased":
            raise SubjectErased("erased")
        raise self.state


def sealed_value(rule: TopicRule = VALUE_RULE, value: bytes = b"secret", key: bytes = b"cust-1") -> tuple[bytes, list]:
    codec = RuleCodec(rule)
    return codec.seal_value(value, "orders.enc", key.decode(), KEY_ID, DEK), codec.sealed_headers([("trace", b"t")])


def test_whole_value_round_trip_binds_the_output_topic_and_subject() -> None:
    value, headers = sealed_value()
    assert headers == [("strongroom.enc", b"\x01\x01"), ("trace", b"t")]
    # the envelope core itself opens it with the output topic and the key as subject
    ctx = RecordContext("orders.enc", b"cust-1")
    assert decrypt_value(value, lambda ref: DEK, ctx) == b"secret"
    assert parse(value).key_ref == SubjectKeyRef(KEY_ID)
    keys = Keys()
    out = RuleCodec(VALUE_RULE).open(b"cust-1", value, headers, "orders.enc", keys)
    assert out == Opened(b"secret", [("trace", b"t")], "cust-1", False)
    assert keys.calls == [(KEY_ID, "cust-1")]


def test_moved_or_tampered_records_fail_integrity() -> None:
    value, headers = sealed_value()
    codec = RuleCodec(VALUE_RULE)
    moved = codec.open(b"cust-1", value, headers, "other.enc", Keys())
    assert isinstance(moved, Failed)
    assert isinstance(moved.error, IntegrityError)
    assert moved.key_ref == SubjectKeyRef(KEY_ID)
    other_subject = codec.open(b"cust-2", value, headers, "orders.enc", Keys())
    assert isinstance(other_subject, Failed)
    flipped = value[:-1] + bytes([value[-1] ^ 1])
    tampered = codec.open(b"cust-1", flipped, headers, "orders.enc", Keys())
    assert isinstance(tampered, Failed)
    assert tampered.reason.startswith("IntegrityError: record does not belong to topic 'orders.enc'")


def test_unknown_format_version_in_the_value_or_the_marker() -> None:
    value, headers = sealed_value()
    codec = RuleCodec(VALUE_RULE)
    newer = value[:1] + b"\x02" + value[2:]
    out = codec.open(b"cust-1", newer, headers, "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert isinstance(out.error, UnsupportedFormatVersion)
    out = codec.open(b"cust-1", value, [("strongroom.enc", b"\x02\x01")], "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert isinstance(out.error, UnsupportedFormatVersion)


def test_marker_of_the_other_mode_is_a_failure_not_a_guess() -> None:
    value, _ = sealed_value()
    out = RuleCodec(FIELDS_RULE).open(b"cust-1", value, [("strongroom.enc", b"\x01\x01")], "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert "marked whole-value but the rule for this topic is mode 'fields'" in out.reason


def test_passthrough_tombstones_and_unmarked_plaintext_but_not_unmarked_envelopes() -> None:
    codec = RuleCodec(VALUE_RULE)
    assert codec.open(b"k", None, [("strongroom.enc", b"\x01\x01")], "orders.enc", Keys()) == Passthrough()
    assert codec.open(b"k", b"plain", [], "orders.enc", Keys()) == Passthrough()
    value, _ = sealed_value()
    # a mirror that dropped headers: the value still looks like an envelope, so it is opened (as Spark does)
    out = codec.open(b"cust-1", value, [], "orders.enc", Keys())
    assert isinstance(out, Opened)
    assert out.value == b"secret"


def test_pending_erased_kms_down_and_lost_kek_are_never_confused() -> None:
    value, headers = sealed_value()
    codec = RuleCodec(VALUE_RULE)
    assert codec.open(b"cust-1", value, headers, "orders.enc", Keys("pending")) == Pending(
        SubjectKeyRef(KEY_ID), "cust-1"
    )
    assert codec.open(b"cust-1", value, headers, "orders.enc", Keys("erased")) == Erased("cust-1")
    down = codec.open(b"cust-1", value, headers, "orders.enc", Keys(KmsUnavailable("connection refused")))
    assert isinstance(down, KmsDown)
    lost = codec.open(b"cust-1", value, headers, "orders.enc", Keys(KekDisabled("KEK local:k1 is disabled")))
    assert isinstance(lost, Failed)
    assert lost.reason == "KekDisabled: KEK local:k1 is disabled"
    with pytest.raises(KeyTableClosed):
        codec.open(b"cust-1", value, headers, "orders.enc", Keys(KeyTableClosed("reader stopped")))


def test_no_subject_on_read_is_a_failure() -> None:
    value, headers = sealed_value()
    out = RuleCodec(VALUE_RULE).open(None, value, headers, "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert "record key is missing" in out.reason


def test_wrapped_dek_envelopes_are_refused_clearly() -> None:
    ref = WrappedDekRef("local:kek", b"\x01" * 40)
    value = seal(b"x", DEK, ref, RecordContext("orders.enc", b"k"))
    out = RuleCodec(VALUE_RULE).open(b"k", value, [("strongroom.enc", b"\x01\x01")], "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert isinstance(out.error, UnsupportedKeyRef)


def test_fields_round_trip_and_erasure_nulls_only_the_encrypted_fields() -> None:
    codec = RuleCodec(FIELDS_RULE)
    raw = json.dumps(DOC).encode()
    sealed = codec.seal_value(raw, "orders.enc", "cust-1", KEY_ID, DEK)
    doc = json.loads(sealed)
    assert doc["email"].startswith("sr1:")
    assert doc["address"].startswith("sr1:")
    assert doc["total"] == 12.5
    headers = codec.sealed_headers([])
    assert headers == [("strongroom.enc", b"\x01\x02")]
    opened = codec.open(b"cust-1", sealed, headers, "orders.enc", Keys())
    assert isinstance(opened, Opened)
    assert json.loads(opened.value) == DOC
    erased = codec.open(b"cust-1", sealed, headers, "orders.enc", Keys("erased"))
    assert isinstance(erased, Opened)
    assert erased.erased_fields
    assert json.loads(erased.value) == {"id": 1, "email": None, "address": None, "total": 12.5}
    pending = codec.open(b"cust-1", sealed, headers, "orders.enc", Keys("pending"))
    assert pending == Pending(SubjectKeyRef(KEY_ID), "cust-1")


def test_fields_downgrade_to_plaintext_is_caught() -> None:
    codec = RuleCodec(FIELDS_RULE)
    sealed = json.loads(codec.seal_value(json.dumps(DOC).encode(), "orders.enc", "cust-1", KEY_ID, DEK))
    sealed["email"] = "attacker@example.com"
    out = codec.open(b"cust-1", json.dumps(sealed).encode(), codec.sealed_headers([]), "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert isinstance(out.error, UnencryptedField)


def test_fields_record_without_the_fields_is_still_marked_and_reads_back() -> None:
    codec = RuleCodec(FIELDS_RULE)
    raw = b'{"id": 2}'
    assert codec.seal_value(raw, "orders.enc", "c", KEY_ID, DEK) == raw
    out = codec.open(b"c", raw, codec.sealed_headers([]), "orders.enc", Keys())
    assert out == Opened(raw, [], "c", False)


def test_json_subject_is_read_from_the_encrypted_value() -> None:
    rule = TopicRule.model_validate(
        {"topic": "orders", "mode": "fields", "fields": ["$.email"], "subject": {"source": "json", "path": "$.cid"}}
    )
    codec = RuleCodec(rule)
    sealed = codec.seal_value(b'{"cid": 77, "email": "a@b"}', "orders.enc", "77", KEY_ID, DEK)
    keys = Keys()
    out = codec.open(None, sealed, codec.sealed_headers([]), "orders.enc", keys)
    assert isinstance(out, Opened)
    assert keys.calls == [(KEY_ID, "77")]


def test_not_json_in_field_mode_cannot_be_sealed() -> None:
    from strongroom.envelope import NotJson

    with pytest.raises(NotJson):
        RuleCodec(FIELDS_RULE).seal_value(b"\x00binary", "orders.enc", "c", KEY_ID, DEK)


def test_field_strings_carry_base64_envelopes_bound_to_their_path() -> None:
    codec = RuleCodec(FIELDS_RULE)
    doc = json.loads(codec.seal_value(json.dumps(DOC).encode(), "orders.enc", "cust-1", KEY_ID, DEK))
    envelope = base64.b64decode(doc["email"][4:])
    assert parse(envelope).key_ref == SubjectKeyRef(KEY_ID)


@pytest.mark.parametrize("marker", [None, b"\x01", b"\x01\x01\x01", b"\x01\x09"])
def test_malformed_marker_headers_fail_clearly(marker: bytes | None) -> None:
    value, _ = sealed_value()
    codec = RuleCodec(VALUE_RULE)
    for _ in range(2):  # parsed markers are cached; bad ones must fail every time
        out = codec.open(b"cust-1", value, [("strongroom.enc", marker)], "orders.enc", Keys())
        assert isinstance(out, Failed)
        assert "strongroom.enc" in out.reason


def test_non_utf8_key_has_no_subject_on_read() -> None:
    value, headers = sealed_value()
    out = RuleCodec(VALUE_RULE).open(b"\xff\xfe", value, headers, "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert "not UTF-8" in out.reason


# ---------------------------------------------------------------------------- hostile input (issue 11)
def test_encrypted_only_readers_refuse_unmarked_records_in_both_modes() -> None:
    for rule in (VALUE_RULE, FIELDS_RULE):
        codec = RuleCodec(rule, encrypted_only=True)
        out = codec.open(b"cust-1", json.dumps(DOC).encode(), [], "orders.enc", Keys())
        assert isinstance(out, Failed)
        assert "no strongroom.enc marker header" in out.reason
        assert codec.open(b"cust-1", None, [], "orders.enc", Keys()) == Passthrough()  # tombstones are never sealed
    # a mirror that dropped headers: an envelope without the marker is refused too when encrypted-only
    value, _ = sealed_value()
    assert isinstance(
        RuleCodec(VALUE_RULE, encrypted_only=True).open(b"cust-1", value, [], "orders.enc", Keys()), Failed
    )


def test_field_records_with_plaintext_rule_fields_are_refused_even_when_marked() -> None:
    codec = RuleCodec(FIELDS_RULE, encrypted_only=True)
    marked = codec.sealed_headers([])
    out = codec.open(b"cust-1", json.dumps(DOC).encode(), marked, "orders.enc", Keys())
    assert isinstance(out, Failed)
    assert "UnencryptedField" in out.reason


def test_an_escaped_marker_is_refused_by_every_reader() -> None:
    """``"\\u0073r1:..."`` hides from a byte-level search: envelopes are found in the parsed document."""
    codec = RuleCodec(FIELDS_RULE)
    sealed = json.loads(codec.seal_value(json.dumps(DOC).encode(), "orders.enc", "cust-1", KEY_ID, DEK))
    raw = json.dumps(sealed).replace('"sr1:', '"\\u0073r1:').encode()
    assert b"sr1:" not in raw
    for encrypted_only, headers in ((False, []), (True, codec.sealed_headers([])), (False, codec.sealed_headers([]))):
        out = RuleCodec(FIELDS_RULE, encrypted_only=encrypted_only).open(b"cust-1", raw, headers, "orders.enc", Keys())
        assert isinstance(out, Failed), (encrypted_only, headers, out)
        assert "JSON escapes" in out.reason


def test_unmarked_plaintext_with_json_escapes_still_passes_when_plaintext_is_allowed() -> None:
    raw = b'{"id":1,"email":"caf\\u00e9@example.com"}'
    assert RuleCodec(FIELDS_RULE).open(b"cust-1", raw, [], "orders.enc", Keys()) == Passthrough()


def test_the_duplicate_key_downgrade_is_rejected_when_sealing() -> None:
    from strongroom.clients.sealing import Rejected, seal_record

    codec = RuleCodec(FIELDS_RULE)
    sealed = json.loads(codec.seal_value(json.dumps(DOC).encode(), "orders.enc", "cust-1", KEY_ID, DEK))
    hostile = ('{"email":"ann@example.com","email":"' + sealed["email"] + '"}').encode()
    result = seal_record(codec, hostile, [], "orders.enc", "cust-1", (KEY_ID, DEK), 1_000_000)
    assert isinstance(result, Rejected)
    assert "names the member 'email' twice" in result.reason
    lone = seal_record(codec, b'{"note":"\\ud800"}', [], "orders.enc", "cust-1", (KEY_ID, DEK), 1_000_000)
    assert isinstance(lone, Rejected)
    assert "lone UTF-16 surrogate" in lone.reason


def test_a_record_charges_one_seal_per_value_it_seals() -> None:
    """What each record charges its key's usage limit: every value sealed takes its own nonce."""
    assert RuleCodec(VALUE_RULE).seal_count(b"anything") == 1
    fields = RuleCodec(FIELDS_RULE)
    assert fields.seal_count(json.dumps(DOC).encode()) == 2  # fixed paths: the count needs no parsing
    assert fields.seal_count(b"{}") == 2  # an upper bound: a missing field seals nothing
    cards = RuleCodec(
        TopicRule.model_validate({"topic": "orders", "mode": "fields", "fields": ["$.email", "$.cards[*].number"]})
    )
    three = {"email": "a@b", "cards": [{"number": "4111"}, {"number": "5500"}, {"number": "3400"}]}
    assert cards.seal_count(json.dumps(three).encode()) == 4
    assert cards.seal_count(b'{"cards": []}') == 0
    # a value sealing would reject counts one (it is never sealed)
    assert cards.seal_count(b"not json") == 1
    assert cards.seal_count(b'{"a": 1, "a": 2}') == 1
