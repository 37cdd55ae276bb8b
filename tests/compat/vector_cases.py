"""The frozen test vectors of the wire format: inputs, and how to compute their bytes.

Everything is fixed — KEK, DEK, key id, nonces — so sealing is deterministic
(:func:`strongroom.crypto.nonces.fixed_nonces_for_vectors`). ``generate_vectors.py`` writes the
computed bytes to ``vectors/*.json`` ONCE; from then on the files are the truth and
``test_vectors.py`` checks that today's code still opens them and re-creates them byte for byte.
Never regenerate released vectors to make a test pass: a difference means old data broke.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import (
    AadProfile,
    KeyRef,
    RecordContext,
    SubjectKeyRef,
    ValueMode,
    WrappedDekRef,
    aad_for,
    encrypt_json_fields,
    marker_header,
    seal,
)
from strongroom.kms.local import wrap_with_kek

DEK = bytes(range(0x00, 0x20))
KEY_ID = bytes(range(0x10, 0x20))
KEK = bytes(range(0x40, 0x60))
KEK_ID = "00000000-0000-4000-8000-000000000001"
KEK_VERSION = 1
WRAP_NONCE = bytes.fromhex("b0b1b2b3b4b5b6b7b8b9babb")


def nonce(n: int) -> bytes:
    return bytes([0xA0 + n]) * 12


@dataclass
class Case:
    name: str
    description: str
    mode: ValueMode
    key_kind: str  # "subject_key" | "wrapped_dek"
    topic: str
    subject: bytes
    profile: AadProfile
    plaintext: bytes = b""
    document: dict[str, Any] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)
    nonce_count: int = 1


CASES = [
    Case(
        "whole-value-subject-key-topic",
        "Whole value, per-subject key reference, AAD binds topic + subject.",
        ValueMode.WHOLE_VALUE,
        "subject_key",
        "orders",
        b"customer-42",
        AadProfile.TOPIC,
        plaintext=b'{"order":1001,"email":"ann@example.com"}',
    ),
    Case(
        "whole-value-wrapped-dek-topic",
        "Whole value, DEK wrapped by a local-KMS KEK carried in the envelope; AAD binds topic + record key.",
        ValueMode.WHOLE_VALUE,
        "wrapped_dek",
        "payments",
        b"\x00\x01binary-key\xff",
        AadProfile.TOPIC,
        plaintext=bytes(range(256)),
    ),
    Case(
        "whole-value-subject-key-portable",
        "Whole value, per-subject key, PORTABLE profile (topic not bound), empty plaintext.",
        ValueMode.WHOLE_VALUE,
        "subject_key",
        "eu.orders",
        b"customer-42",
        AadProfile.PORTABLE,
        plaintext=b"",
    ),
    Case(
        "whole-value-wrapped-dek-null-key",
        "Whole value, wrapped DEK, null record key (empty subject), unicode topic.",
        ValueMode.WHOLE_VALUE,
        "wrapped_dek",
        "événements",
        b"",
        AadProfile.TOPIC,
        plaintext="grüße 🎉".encode(),
    ),
    Case(
        "json-fields-subject-key-topic",
        "JSON fields: nested member, array wildcard, object-valued and number-valued fields.",
        ValueMode.JSON_FIELDS,
        "subject_key",
        "customers",
        b"customer-42",
        AadProfile.TOPIC,
        document={
            "id": 42,
            "email": "ann@example.com",
            "address": {"city": "Oslo", "zip": "0150"},
            "phones": [{"type": "home", "number": "+47 1234"}, {"type": "work", "number": "+47 5678"}],
            "score": 12.5,
            "note": "名前",
        },
        rules=["$.email", "$.address", "$.phones[*].number", "$.score"],
        nonce_count=5,
    ),
    Case(
        "json-fields-wrapped-dek-portable",
        "JSON fields with a wrapped DEK and the PORTABLE profile; a quoted member name.",
        ValueMode.JSON_FIELDS,
        "wrapped_dek",
        "customers",
        b"customer-7",
        AadProfile.PORTABLE,
        document={"user name": "Bo", "ssn": "010203-12345", "tags": ["a", "b"]},
        rules=['$["user name"]', "$.ssn"],
        nonce_count=2,
    ),
]


def key_ref(case: Case) -> KeyRef:
    if case.key_kind == "subject_key":
        return SubjectKeyRef(KEY_ID)
    edek = wrap_with_kek(KEK, KEK_ID, KEK_VERSION, DEK, nonce=WRAP_NONCE)
    return WrappedDekRef(f"local:{KEK_ID}", edek)


def build(case: Case) -> dict[str, Any]:
    """The full vector for ``case`` as written to ``vectors/<name>.json``."""
    ref = key_ref(case)
    ctx = RecordContext(case.topic, case.subject, case.profile)
    nonces = [nonce(i) for i in range(case.nonce_count)]
    header_name, header_value = marker_header(case.mode)
    vector: dict[str, Any] = {
        "name": case.name,
        "description": case.description,
        "format_version": 1,
        "value_mode": case.mode.name.lower(),
        "record_header": {"name": header_name, "value_hex": header_value.hex()},
        "dek_hex": DEK.hex(),
        "key_ref": _key_ref_json(ref),
        "context": {"topic": case.topic, "subject_hex": case.subject.hex(), "profile": case.profile.name.lower()},
        "nonces_hex": [n.hex() for n in nonces],
    }
    with fixed_nonces_for_vectors(nonces):
        if case.mode is ValueMode.WHOLE_VALUE:
            vector |= {
                "plaintext_hex": case.plaintext.hex(),
                "aad_hex": aad_for(ref, ctx).hex(),
                "envelope_hex": seal(case.plaintext, DEK, ref, ctx).hex(),
            }
        else:
            value = json.dumps(case.document, ensure_ascii=False).encode()
            sealed = encrypt_json_fields(value, case.rules, DEK, ref, ctx)
            vector |= {
                "rules": case.rules,
                "value_utf8": value.decode(),
                "sealed_value_utf8": sealed.decode(),
                "field_aads_hex": {rule: aad_for(ref, ctx, rule).hex() for rule in case.rules},
            }
    return vector


def _key_ref_json(ref: KeyRef) -> dict[str, Any]:
    if isinstance(ref, SubjectKeyRef):
        return {"kind": "subject_key", "key_id_hex": ref.key_id.hex()}
    return {
        "kind": "wrapped_dek",
        "kek_ref": ref.kek_ref,
        "edek_hex": ref.edek.hex(),
        "kek": {
            "provider": "local",
            "kek_id": KEK_ID,
            "version": KEK_VERSION,
            "kek_hex": KEK.hex(),
            "wrap_nonce_hex": WRAP_NONCE.hex(),
        },
    }
