"""Record conventions of the client library: subjects, headers and rules exactly as the Spark pipelines decide."""

from __future__ import annotations

import json

import pytest

from strongroom.clients.records import (
    NoSubject,
    java_double_text,
    normalize_headers,
    rule_for_encrypted,
    source_topic,
    subject_of,
    with_marker,
    without_marker,
)
from strongroom.errors import ConfigError
from strongroom.rules import EncryptionRules, TopicRule


def rule(**kwargs: object) -> TopicRule:
    return TopicRule.model_validate({"topic": "orders", **kwargs})


def test_headers_accept_lists_dicts_and_text() -> None:
    assert normalize_headers(None) == []
    assert normalize_headers([("a", b"1"), ("b", "two"), ("c", None)]) == [("a", b"1"), ("b", b"two"), ("c", None)]
    assert normalize_headers({"a": "x"}) == [("a", b"x")]
    with pytest.raises(ConfigError, match="header 'n' has a int value"):
        normalize_headers([("n", 5)])


def test_marker_goes_first_and_replaces_an_old_one() -> None:
    headers = [("trace", b"1"), ("strongroom.enc", b"\x09\x09"), ("source", b"app")]
    marked = with_marker(headers, ("strongroom.enc", b"\x01\x01"))
    assert marked == [("strongroom.enc", b"\x01\x01"), ("trace", b"1"), ("source", b"app")]
    assert without_marker(marked) == [("trace", b"1"), ("source", b"app")]


def test_subject_from_the_key() -> None:
    r = rule()
    assert subject_of(r, b"cust-1", b"{}", []) == "cust-1"
    assert subject_of(r, None, b"{}", []) == NoSubject("no subject (record key is missing or empty)")
    assert subject_of(r, b"", b"{}", []) == NoSubject("no subject (record key is missing or empty)")
    assert isinstance(subject_of(r, b"\xff\xfe", b"{}", []), NoSubject)
    assert "more than 4096" in str(subject_of(r, b"x" * 5000, b"{}", []))


def test_subject_from_the_first_header_like_spark() -> None:
    r = rule(subject={"source": "header", "header": "tenant"})
    headers = [("other", b"x"), ("tenant", b"first"), ("tenant", b"second")]
    assert subject_of(r, b"ignored", None, headers) == "first"
    assert isinstance(subject_of(r, b"ignored", None, [("tenant", None)]), NoSubject)
    assert isinstance(subject_of(r, b"ignored", None, []), NoSubject)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"customer": {"id": "c-7"}}, "c-7"),
        ({"customer": {"id": 42}}, "42"),
        ({"customer": {"id": -3}}, "-3"),
        ({"customer": {"id": True}}, "true"),
        ({"customer": {"id": 1.5}}, "1.5"),
        ({"customer": {"id": 1e20}}, "1.0E20"),
        ({"customer": {"id": "ünï"}}, "ünï"),
    ],
)
def test_subject_from_json_renders_like_get_json_object(value: object, expected: str) -> None:
    r = rule(mode="fields", fields=["$.email"], subject={"source": "json", "path": "$.customer.id"})
    assert subject_of(r, None, json.dumps(value).encode(), []) == expected


@pytest.mark.parametrize(
    "value",
    [b'{"customer": {"id": null}}', b'{"customer": {"id": ""}}', b'{"customer": {"id": {"x": 1}}}', b'{"x": 1}',
     b"not json", b"[1, 2]", None],
)  # fmt: skip
def test_json_subject_missing(value: bytes | None) -> None:
    r = rule(mode="fields", fields=["$.email"], subject={"source": "json", "path": "$.customer.id"})
    assert isinstance(subject_of(r, None, value, []), NoSubject)


@pytest.mark.parametrize(
    ("number", "text"),
    [(100.0, "100.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1234567.0, "1234567.0"), (1e7, "1.0E7"),
     (12345678.9, "1.23456789E7"), (-2.5, "-2.5"), (0.0, "0.0"), (-0.0, "-0.0"), (123.456, "123.456")],
)  # fmt: skip
def test_java_double_text(number: float, text: str) -> None:
    assert java_double_text(number) == text


def test_rule_of_an_encrypted_topic_direct_or_through_the_output_template() -> None:
    encrypt_side = EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": "orders", "mode": "fields", "fields": ["$.email"]}, {"topic": "pay.*", "pattern": True}]}
    )
    assert rule_for_encrypted(encrypt_side, "orders.enc").mode == "fields"
    assert rule_for_encrypted(encrypt_side, "payments.enc").pattern
    decrypt_side = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "orders.enc"}]})
    assert rule_for_encrypted(decrypt_side, "orders.enc").topic == "orders.enc"
    with pytest.raises(ConfigError, match=r"no encryption rule matches topic 'invoices\.enc'"):
        rule_for_encrypted(encrypt_side, "invoices.enc")


def test_source_topic_from_templates() -> None:
    assert source_topic(rule(output_topic="secure.$(topic).v1"), "secure.orders.v1") == "orders"
    assert source_topic(rule(output_topic="secure.$(topic).v1"), "orders.enc") is None
    assert source_topic(rule(output_topic="all-encrypted"), "all-encrypted") == "orders"
    assert source_topic(rule(output_topic="$(topic).enc"), ".enc") is None
