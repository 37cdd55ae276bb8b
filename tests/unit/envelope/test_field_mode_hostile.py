"""Field mode against hostile documents: what is refused, on both sides, with which error (issue 11).

Each case is a document an attacker or a broken producer could write. The rules these tests pin are
listed in docs/wire-format.md ("Field mode: what is refused"); the Java data plane must decide the same.
"""

from __future__ import annotations

import base64
import json

import pytest

from strongroom.envelope import (
    FIELD_PREFIX,
    IntegrityError,
    KeyRef,
    MalformedEnvelope,
    NotJson,
    RecordContext,
    SubjectKeyRef,
    UnencryptedField,
    decrypt_json_fields,
    encrypt_json_fields,
)
from strongroom.envelope.errors import StrayEnvelope, UnverifiedEnvelope
from strongroom.envelope.json_fields import FieldDocument
from strongroom.envelope.jsonpath import FieldRules

DEK = bytes(range(32))
REF = SubjectKeyRef(bytes(range(16)))
CTX = RecordContext("customers.enc", b"customer-7")
RULES = ["$.email"]


def lookup(ref: KeyRef) -> bytes | None:
    return DEK


def sealed_email(ctx: RecordContext = CTX, dek: bytes = DEK, ref: SubjectKeyRef = REF, path: str = "$.email") -> str:
    """A genuine ``sr1:`` string for ``path`` (sealed by the real codec)."""
    name = path[2:]
    value = encrypt_json_fields(json.dumps({name: "alice@example.com"}).encode(), [path], dek, ref, ctx)
    text: str = json.loads(value)[name]
    return text


def escaped(text: str) -> str:
    """``text`` as raw JSON with the ``s`` of ``sr1:`` written as ``\\u0073``."""
    return '"\\u0073' + text[1:] + '"'


# ------------------------------------------------------------------------------ strict JSON, both sides
HOSTILE_DOCUMENTS = {
    "duplicate key hides plaintext": b'{"email":"alice@example.com","email":"' + sealed_email().encode() + b'"}',
    "duplicate key, nested": b'{"a":{"b":1,"b":2},"email":"x"}',
    "lone high surrogate": b'{"note":"\\ud800","email":"x"}',
    "lone low surrogate in a rule field": b'{"email":"\\udc00"}',
    "lone surrogate in a member name": b'{"\\ud800":1,"email":"x"}',
    "invalid UTF-8": b'{"email":"\xff\xfe"}',
    "NaN": b'{"email":NaN}',
    "Infinity": b'{"n":-Infinity,"email":"x"}',
    "number beyond a double": b'{"n":1e400,"email":"x"}',
    "byte order mark": b'\xef\xbb\xbf{"email":"x"}',
    "nesting too deep": b'{"email":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "not an object": b'["email"]',
    "truncated": b'{"email":"x"',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_DOCUMENTS))
def test_hostile_documents_are_refused_when_encrypting(name: str) -> None:
    with pytest.raises(NotJson):
        encrypt_json_fields(HOSTILE_DOCUMENTS[name], RULES, DEK, REF, CTX)


@pytest.mark.parametrize("name", sorted(HOSTILE_DOCUMENTS))
def test_hostile_documents_are_refused_when_decrypting(name: str) -> None:
    document = HOSTILE_DOCUMENTS[name]
    if name == "number beyond a double":  # refused when the opened document is written back
        document = b'{"n":1e400,"email":"' + sealed_email().encode() + b'"}'
    with pytest.raises(NotJson):
        decrypt_json_fields(document, lookup, CTX, expect_encrypted=RULES)


def test_the_duplicate_key_downgrade_of_the_issue_is_refused() -> None:
    """``{"email":"alice@example.com","email":"sr1:<any envelope>"}`` once stored the plaintext e-mail under
    the encrypted marker: the sealed-looking duplicate made the encryptor keep the document unchanged."""
    document = HOSTILE_DOCUMENTS["duplicate key hides plaintext"]
    with pytest.raises(NotJson, match="names the member 'email' twice"):
        encrypt_json_fields(document, RULES, DEK, REF, CTX)


def test_a_lone_surrogate_is_a_clear_error_not_a_unicode_exception() -> None:
    with pytest.raises(NotJson, match="lone UTF-16 surrogate"):
        encrypt_json_fields(b'{"note": "\\ud800"}', ["$.note"], DEK, REF, CTX)
    # a surrogate pair written as escapes is a real character and fine
    sealed = encrypt_json_fields(b'{"note": "\\ud83c\\udf89"}', ["$.note"], DEK, REF, CTX)
    assert json.loads(decrypt_json_fields(sealed, lookup, CTX, expect_encrypted=["$.note"])) == {"note": "🎉"}


# ------------------------------------------------------------------------------ values that look sealed
def test_a_plaintext_that_only_looks_sealed_is_not_kept() -> None:
    fake = FIELD_PREFIX + base64.b64encode(b"\xf5\x01\x01\x01" + b"\x00" * 40).decode()
    for value in (fake, "sr1:alice@example.com", "sr1:"):
        with pytest.raises(UnverifiedEnvelope):
            encrypt_json_fields(json.dumps({"email": value}).encode(), RULES, DEK, REF, CTX)


@pytest.mark.parametrize(
    ("why", "envelope"),
    [
        ("another subject", lambda: sealed_email(RecordContext("customers.enc", b"customer-8"))),
        ("another topic", lambda: sealed_email(RecordContext("other.enc", b"customer-7"))),
        ("another field", lambda: sealed_email(path="$.phone")),
        ("another key", lambda: sealed_email(dek=bytes(32), ref=SubjectKeyRef(bytes(16)))),
    ],
)
def test_a_genuine_envelope_from_elsewhere_is_not_kept(why: str, envelope: object) -> None:
    text = envelope()  # type: ignore[operator]
    with pytest.raises(UnverifiedEnvelope, match=r"\$\.email"):
        encrypt_json_fields(json.dumps({"email": text}).encode(), RULES, DEK, REF, CTX)


def test_its_own_envelope_is_kept_so_a_rerun_does_not_seal_twice() -> None:
    once = encrypt_json_fields(b'{"email":"alice@example.com","n":1}', RULES, DEK, REF, CTX)
    assert encrypt_json_fields(once, RULES, DEK, REF, CTX) == once


def test_sealed_strings_outside_the_rule_fields_are_refused_when_encrypting() -> None:
    stray = sealed_email(path="$.phone")
    for document in (
        {"email": "a@b", "phone": stray},
        {"email": "a@b", "nested": {"list": [stray]}},
        {"email": "a@b", "note": "sr1:not even base64"},
    ):
        with pytest.raises(StrayEnvelope):
            encrypt_json_fields(json.dumps(document).encode(), RULES, DEK, REF, CTX)


def test_sealed_strings_outside_the_rule_fields_are_left_alone_when_decrypting() -> None:
    stray = sealed_email(path="$.phone")
    value = encrypt_json_fields(b'{"email":"alice@example.com"}', RULES, DEK, REF, CTX)
    document = json.loads(value)
    document["phone"] = stray
    opened = json.loads(decrypt_json_fields(json.dumps(document).encode(), lookup, CTX, expect_encrypted=RULES))
    assert opened == {"email": "alice@example.com", "phone": stray}  # never opened: not a rule field


# ------------------------------------------------------------------------------ escaped spellings
def test_an_escaped_marker_in_a_rule_field_is_refused_in_both_directions() -> None:
    text = sealed_email()
    raw = ('{"email":' + escaped(text) + "}").encode()
    assert FIELD_PREFIX.encode() not in raw  # a byte-level check cannot see it
    with pytest.raises(MalformedEnvelope, match="escapes"):
        encrypt_json_fields(raw, RULES, DEK, REF, CTX)
    with pytest.raises(MalformedEnvelope, match="escapes"):
        decrypt_json_fields(raw, lookup, CTX, expect_encrypted=RULES)
    with pytest.raises(MalformedEnvelope, match="escapes"):
        decrypt_json_fields(raw, lookup, CTX)  # without rules too: envelopes are found in the parsed document


def test_an_escaped_marker_outside_the_rule_fields_is_refused_when_encrypting() -> None:
    raw = ('{"email":"a@b","other":' + escaped(sealed_email()) + "}").encode()
    with pytest.raises(StrayEnvelope):
        encrypt_json_fields(raw, RULES, DEK, REF, CTX)


def test_plaintext_at_a_rule_field_is_refused_when_the_reader_knows_the_rules() -> None:
    with pytest.raises(UnencryptedField):
        decrypt_json_fields(b'{"email":"alice@example.com"}', lookup, CTX, expect_encrypted=RULES)
    assert issubclass(UnverifiedEnvelope, IntegrityError)


# ------------------------------------------------------------------------------ every key a record needs
def test_the_document_lists_every_key_its_rule_fields_need() -> None:
    other = SubjectKeyRef(bytes([9]) * 16)
    first = json.loads(encrypt_json_fields(b'{"email":"a@b"}', RULES, DEK, REF, CTX))
    second = json.loads(encrypt_json_fields(b'{"phone":"123"}', ["$.phone"], bytes(32), other, CTX))
    raw = json.dumps({**first, **second}).encode()
    document = FieldDocument(raw, FieldRules(["$.email", "$.phone"]))
    assert document.key_refs() == [REF, other]
    assert FieldDocument(raw, FieldRules(["$.email"])).key_refs() == [REF]  # the stray one is not needed
