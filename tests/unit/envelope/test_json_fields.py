"""JSON field mode: selected fields encrypted in place, the rest readable, types preserved."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from strongroom.envelope import (
    FIELD_PREFIX,
    FieldPath,
    FieldRules,
    IntegrityError,
    InvalidFieldPath,
    KeyRef,
    MalformedEnvelope,
    NotJson,
    NotJsonObject,
    RecordContext,
    SubjectErased,
    SubjectKeyRef,
    UnencryptedField,
    WrappedDekRef,
    decrypt_json_fields,
    encrypt_json_fields,
    parse,
)
from strongroom.errors import KmsError

DEK = bytes(range(32))
REF = SubjectKeyRef(bytes(range(16)))
CTX = RecordContext("customers", b"customer-7")

DOC: dict[str, Any] = {
    "id": 7,
    "email": "ann@example.com",
    "name": {"first": "Ann", "last": "Lee"},
    "tags": ["vip", "eu"],
    "items": [{"sku": "a1", "email": "x@y.z"}, {"sku": "b2"}, {"sku": "c3", "email": None}],
    "score": 12.5,
    "active": True,
    "nothing": None,
    "ünïcödé": "日本語 ✓ 🎉",
}


def lookup(ref: KeyRef) -> bytes | None:
    return DEK


def enc(doc: Any, rules: list[str], ctx: RecordContext = CTX) -> bytes:
    value = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return encrypt_json_fields(value, rules, DEK, REF, ctx)


def test_selected_fields_are_sealed_and_the_rest_untouched() -> None:
    sealed = json.loads(enc(DOC, ["$.email", "$.name.last", "$.items[*].email"]))
    assert sealed["email"].startswith(FIELD_PREFIX)
    assert sealed["name"]["first"] == "Ann"
    assert sealed["name"]["last"].startswith(FIELD_PREFIX)
    assert sealed["items"][0]["email"].startswith(FIELD_PREFIX)
    assert "email" not in sealed["items"][1]
    assert sealed["items"][2]["email"].startswith(FIELD_PREFIX)  # null is encrypted too
    for key in ("id", "tags", "score", "active", "nothing", "ünïcödé"):
        assert sealed[key] == DOC[key]


def test_round_trip_restores_every_type() -> None:
    rules = ["$.id", "$.name", "$.tags", "$.score", "$.active", "$.nothing", "$.ünïcödé", "$.items[*].sku"]
    sealed = enc(DOC, rules)
    assert all(json.loads(sealed)[k].startswith(FIELD_PREFIX) for k in ("id", "name", "tags", "active"))
    assert json.loads(decrypt_json_fields(sealed, lookup, CTX)) == DOC


def test_array_elements_with_wildcard() -> None:
    sealed = json.loads(enc(DOC, ["$.tags[*]"]))
    assert all(tag.startswith(FIELD_PREFIX) for tag in sealed["tags"])
    assert json.loads(decrypt_json_fields(json.dumps(sealed).encode(), lookup, CTX))["tags"] == ["vip", "eu"]


def test_reordering_an_array_keeps_fields_decryptable() -> None:
    sealed = json.loads(enc(DOC, ["$.items[*].email"]))
    sealed["items"].reverse()
    opened = json.loads(decrypt_json_fields(json.dumps(sealed).encode(), lookup, CTX))
    assert [item.get("email") for item in opened["items"]] == [None, None, "x@y.z"]


def test_nested_arrays() -> None:
    doc = {"m": [[{"e": 1}, {"e": 2}], [{"e": 3}]]}
    sealed = enc(doc, ["$.m[*][*].e"])
    assert json.loads(sealed)["m"][1][0]["e"].startswith(FIELD_PREFIX)
    assert json.loads(decrypt_json_fields(sealed, lookup, CTX)) == doc


def test_missing_paths_are_left_alone_and_value_is_unchanged() -> None:
    value = b'{"a" : 1,  "b": {"c": 2}}'
    rules = ["$.nope", "$.b.nope", "$.a.deeper", "$.b.c.deeper", "$.a[*]", "$.list[*].x"]
    assert encrypt_json_fields(value, rules, DEK, REF, CTX) == value
    assert decrypt_json_fields(value, lookup, CTX) == value


def test_moving_a_field_ciphertext_to_another_path_fails() -> None:
    sealed = json.loads(enc(DOC, ["$.email", "$.name.last"]))
    sealed["email"], sealed["name"]["last"] = sealed["name"]["last"], sealed["email"]
    with pytest.raises(IntegrityError, match=r"field \$\.(email|name\.last)"):
        decrypt_json_fields(json.dumps(sealed).encode(), lookup, CTX)


def test_moving_a_field_ciphertext_to_another_subject_or_topic_fails() -> None:
    sealed = enc(DOC, ["$.email"])
    with pytest.raises(IntegrityError):
        decrypt_json_fields(sealed, lookup, RecordContext("customers", b"customer-8"))
    with pytest.raises(IntegrityError):
        decrypt_json_fields(sealed, lookup, RecordContext("other", b"customer-7"))


def test_unicode_field_names_and_values() -> None:
    doc = {"名前": "太郎", "a b": {"c.d": "ü"}, 'quo"te': "q"}
    rules = ["$.名前", '$["a b"]["c.d"]', '$["quo\\"te"]']
    sealed = json.loads(enc(doc, rules))
    assert all(v.startswith(FIELD_PREFIX) for v in (sealed["名前"], sealed["a b"]["c.d"], sealed['quo"te']))
    assert json.loads(decrypt_json_fields(json.dumps(sealed).encode(), lookup, CTX)) == doc


def test_non_canonical_rule_spelling_binds_the_canonical_path() -> None:
    sealed = enc({"email": "e"}, ['$["email"]'])
    envelope = parse(base64.b64decode(json.loads(sealed)["email"][len(FIELD_PREFIX) :]))
    assert envelope.key_ref == REF
    assert json.loads(decrypt_json_fields(sealed, lookup, CTX)) == {"email": "e"}


def test_re_encrypting_is_idempotent() -> None:
    once = enc(DOC, ["$.email"])
    assert encrypt_json_fields(once, ["$.email"], DEK, REF, CTX) == once


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (b"\xff\xfe", NotJson, "not UTF-8"),
        (b"not json", NotJson, "not JSON"),
        (b"", NotJson, "not JSON"),
        (b'{"a": NaN}', NotJson, "NaN"),
        (b"[1, 2]", NotJsonObject, "array"),
        (b'"text"', NotJsonObject, "string"),
        (b"42", NotJsonObject, "number"),
        (b"null", NotJsonObject, "null"),
        (b"true", NotJsonObject, "boolean"),
        (b"[" * 100_000 + b"]" * 100_000, NotJson, "JSON"),
    ],
)
def test_bad_values_are_clear_errors(value: bytes, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        encrypt_json_fields(value, ["$.a"], DEK, REF, CTX)
    with pytest.raises(error, match=text):
        decrypt_json_fields(value, lookup, CTX)


def test_numbers_beyond_a_double_are_refused_when_the_document_is_rewritten() -> None:
    for rules in (["$.a"], ["$.b"]):
        with pytest.raises(NotJson, match="does not fit a double"):
            encrypt_json_fields(b'{"a": 1e400, "b": "x"}', rules, DEK, REF, CTX)
    untouched = b'{"a": 1e400}'
    assert decrypt_json_fields(untouched, lookup, CTX) == untouched  # nothing to open: passed as is


def test_erased_subject_nulls_fields_by_default_or_raises() -> None:
    sealed = enc(DOC, ["$.email", "$.name"])
    opened = json.loads(decrypt_json_fields(sealed, lambda ref: None, CTX))
    assert opened["email"] is None
    assert opened["name"] is None
    assert opened["id"] == 7
    with pytest.raises(SubjectErased, match=r"\$\.(email|name)"):
        decrypt_json_fields(sealed, lambda ref: None, CTX, on_erased="raise")


def test_several_keys_in_one_document_are_looked_up_once_each() -> None:
    other_ref = WrappedDekRef("local:k1", b"edek")
    other_dek = bytes(32)
    # Each key seals its own fields (sealing again with other rules would refuse the first pass's envelopes
    # as strays); the two results are merged into one document.
    first = json.loads(encrypt_json_fields(json.dumps(DOC).encode(), ["$.email"], DEK, REF, CTX))
    second = json.loads(encrypt_json_fields(json.dumps(DOC).encode(), ["$.name", "$.tags"], other_dek, other_ref, CTX))
    value = json.dumps({**first, "name": second["name"], "tags": second["tags"]}).encode()
    calls: list[KeyRef] = []

    def counting(ref: KeyRef) -> bytes | None:
        calls.append(ref)
        return DEK if ref == REF else other_dek

    assert json.loads(decrypt_json_fields(value, counting, CTX)) == DOC
    assert sorted(map(repr, calls)) == sorted(map(repr, [REF, other_ref]))


def test_lookup_failures_propagate_and_nothing_is_returned() -> None:
    sealed = enc(DOC, ["$.email"])

    def failing(ref: KeyRef) -> bytes | None:
        raise KmsError("KMS down")

    with pytest.raises(KmsError):
        decrypt_json_fields(sealed, failing, CTX)


def test_reserved_prefix_that_is_not_an_envelope_is_an_error() -> None:
    for bad in ("sr1:not base64!", "sr1:" + base64.b64encode(b"garbage").decode(), "sr1:"):
        with pytest.raises(MalformedEnvelope):
            decrypt_json_fields(json.dumps({"a": bad}).encode(), lookup, CTX)


def test_one_bad_field_fails_the_whole_document() -> None:
    sealed = json.loads(enc(DOC, ["$.email", "$.name"]))
    raw = base64.b64decode(sealed["name"][len(FIELD_PREFIX) :])
    sealed["name"] = FIELD_PREFIX + base64.b64encode(raw[:-1] + bytes([raw[-1] ^ 1])).decode()
    with pytest.raises(IntegrityError):
        decrypt_json_fields(json.dumps(sealed).encode(), lookup, CTX)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("$.a", "$.a"),
        ("$.a.b", "$.a.b"),
        ("$.items[*].email", "$.items[*].email"),
        ('$["a"]', "$.a"),
        ('$["a b"]', '$["a b"]'),
        ('$["a.b"][*]', '$["a.b"][*]'),
        ("$.ü", "$.ü"),
        ('$[""]', '$[""]'),
    ],
)
def test_field_paths_have_one_canonical_text(text: str, canonical: str) -> None:
    assert FieldPath.parse(text).text == canonical
    assert FieldPath.parse(canonical).text == canonical


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "$",
        "$.",
        "$[0]",
        "$[*]",
        "$[*].a",
        "$.a[",
        "$.a[1]",
        "$..a",
        '$["a"',
        '$["a"x',
        "$ .a",
        "$.a b",
    ],
)
def test_bad_field_paths(text: str) -> None:
    with pytest.raises(InvalidFieldPath):
        FieldPath.parse(text)


def test_overlapping_rules_are_refused() -> None:
    with pytest.raises(InvalidFieldPath, match="overlap"):
        FieldRules(["$.a", "$.a.b"])
    with pytest.raises(InvalidFieldPath, match="overlap"):
        FieldRules(["$.a[*].b", '$["a"][*]'])
    with pytest.raises(InvalidFieldPath, match="overlap"):
        FieldRules(["$.a", "$.a"])
    assert len(FieldRules(["$.a.b", "$.a.c"]).paths) == 2


def test_expected_fields_that_hold_plaintext_are_refused() -> None:
    sealed = json.loads(enc(DOC, ["$.email", "$.items[*].email"]))
    rules = ["$.email", "$.items[*].email", "$.not_there"]
    value = json.dumps(sealed).encode()
    assert json.loads(decrypt_json_fields(value, lookup, CTX, expect_encrypted=rules)) == DOC
    sealed["items"][0]["email"] = "swapped-in@plaintext"
    with pytest.raises(UnencryptedField, match=r"\$\.items\[\*\]\.email .* string"):
        decrypt_json_fields(json.dumps(sealed).encode(), lookup, CTX, expect_encrypted=rules)
    with pytest.raises(IntegrityError):  # UnencryptedField is an integrity failure
        decrypt_json_fields(b'{"email": null}', lookup, CTX, expect_encrypted=FieldRules(rules))


def test_bad_erased_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="on_erased"):
        decrypt_json_fields(b"{}", lookup, CTX, on_erased="ignore")  # type: ignore[arg-type]
