"""Bad input takes the same outcome kind on the JVM codec as on the Python codec (one parametrised table).

Each case is one codec call; both engines run it and must agree on the outcome: the same error class
name, or success with the same output bytes (sealing uses fixed nonces so the bytes can be compared).
The expected kind is written down too, so a case cannot pass by both engines going wrong the same way.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from jvm_codec import Operation, key_ref_json, kind_of, respelt, run_java, run_python

from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import AadProfile, RecordContext, SubjectKeyRef, WrappedDekRef, seal

pytestmark = pytest.mark.integration

DEK = bytes(range(32))
OTHER_DEK = bytes(range(1, 33))
REF = SubjectKeyRef(bytes(range(16, 32)))
OTHER_REF = SubjectKeyRef(bytes(range(32, 48)))
WRAPPED = WrappedDekRef("local:kek-1", b"\x01edek")
CTX = RecordContext("orders", b"customer-42", AadProfile.TOPIC)
NONCES = [bytes([0xC0 + i]) * 12 for i in range(16)]


def _sealed(plaintext: bytes, *, ref: Any = REF, path: str = "", ctx: RecordContext = CTX) -> bytes:
    with fixed_nonces_for_vectors(NONCES):
        return seal(plaintext, DEK, ref, ctx, path)


def _field(envelope: bytes) -> str:
    return "sr1:" + base64.b64encode(envelope).decode()


ENVELOPE = _sealed(b'{"order":1}')
WRAPPED_ENVELOPE = _sealed(b"x", ref=WRAPPED)
EMAIL = _field(_sealed(b'"ann@example.com"', path="$.email"))
PADDED_EMAIL = _field(_sealed(b'"ann@example.co"', path="$.email"))  # 65 bytes: its base64 ends in one '='


def _flip(data: bytes, index: int, value: int) -> bytes:
    changed = bytearray(data)
    changed[index] = value
    return bytes(changed)


def _op(op: str, value: bytes | str, **extra: Any) -> Operation:
    raw = value.encode() if isinstance(value, str) else value
    spec: Operation = {
        "op": op,
        "input_hex": raw.hex(),
        "dek_hex": DEK.hex(),
        "key_ref": key_ref_json(REF),
        "topic": CTX.topic,
        "subject_hex": CTX.subject.hex(),
        "profile": "topic",
        "nonces_hex": [n.hex() for n in NONCES],
        "keys": [
            {"key_ref": key_ref_json(REF), "dek_hex": DEK.hex()},
            {"key_ref": key_ref_json(OTHER_REF), "dek_hex": OTHER_DEK.hex()},
            {"key_ref": key_ref_json(WRAPPED), "dek_hex": DEK.hex()},
        ],
    }
    return spec | extra


def _fields(op: str, document: str | bytes, rules: list[str] | None = None, **extra: Any) -> Operation:
    spec = _op(f"{op}_fields", document, **extra)
    if rules is not None:
        spec["rules"] = rules
    return spec


DEEP = '{"a":' + "[" * 5000 + "]" * 5000 + "}"
SHALLOW = '{"a":' + "[" * 100 + "]" * 100 + "}"
LONG_NAME = "n" * 70_000
MOVED = _field(_sealed(b"1", path="$.x"))
NOT_JSON_FIELD = _field(_sealed(b"not json", path="$.email"))
DUPLICATE_FIELD = _field(_sealed(b'{"a":1,"a":2}', path="$.email"))
SURROGATE_FIELD = _field(_sealed(b'"\\ud800"', path="$.email"))
UNKNOWN_KEY_FIELD = _field(_sealed(b"1", ref=SubjectKeyRef(bytes(16)), path="$.email"))

CASES: list[tuple[str, Operation, str]] = [
    # the strongroom.enc record header
    *[
        (f"record header {value.hex() or 'empty'}", _op("parse_marker", value), kind)
        for value, kind in (
            (b"\x01\x01", "ok"),
            (b"\x01\x02", "ok"),
            (b"", "MalformedEnvelope"),
            (b"\x01", "MalformedEnvelope"),
            (b"\x01\x01\x00", "MalformedEnvelope"),
            (b"\x02\x01", "UnsupportedFormatVersion"),
            (b"\x01\x04", "UnknownValueMode"),  # 0x03 (schema fields) is Python-only until the JVM learns it
            (b"\x01\x00", "UnknownValueMode"),
        )
    ],
    # whole value: not an envelope, truncated, unknown ids, tampering, keys
    ("garbage", _op("open_value", b"hello world"), "NotAnEnvelope"),
    ("empty value", _op("open_value", b""), "NotAnEnvelope"),
    *[(f"truncated to {n}", _op("open_value", ENVELOPE[:n]), "MalformedEnvelope") for n in (1, 3, 4, 19, 20, 21, 48)],
    ("version 2", _op("open_value", _flip(ENVELOPE, 1, 2)), "UnsupportedFormatVersion"),
    ("reserved cipher 0", _op("open_value", _flip(ENVELOPE, 2, 0)), "UnknownCipher"),
    ("key-ref kind 3", _op("open_value", _flip(ENVELOPE, 3, 3)), "UnknownKeyRefKind"),
    ("AAD profile 9", _op("open_value", _flip(ENVELOPE, 20, 9)), "UnknownAadProfile"),
    ("profile downgraded to portable", _op("open_value", _flip(ENVELOPE, 20, 2)), "IntegrityError"),
    ("ciphertext bit flipped", _op("open_value", _flip(ENVELOPE, 40, ENVELOPE[40] ^ 1)), "IntegrityError"),
    ("moved to another topic", _op("open_value", ENVELOPE, topic="payments"), "IntegrityError"),
    (
        "mirror read through a topic map",
        _op("open_value", ENVELOPE, topic="us.orders", topic_map={"us.orders": "orders"}),
        "ok",
    ),
    ("another subject", _op("open_value", ENVELOPE, subject_hex=b"customer-43".hex()), "IntegrityError"),
    ("unknown key id", _op("open_value", _flip(ENVELOPE, 4, 0xEE)), "UnknownKey"),
    ("another known key id", _op("open_value", ENVELOPE[:4] + bytes(range(32, 48)) + ENVELOPE[20:]), "IntegrityError"),
    (
        "erased key",
        _op("open_value", ENVELOPE, keys=[{"key_ref": key_ref_json(REF), "dek_hex": None}]),
        "SubjectErased",
    ),
    ("wrapped DEK opens", _op("open_value", WRAPPED_ENVELOPE), "ok"),
    (
        "KEK reference length 0",
        _op("open_value", WRAPPED_ENVELOPE[:4] + b"\x00\x00" + WRAPPED_ENVELOPE[6:]),
        "MalformedEnvelope",
    ),
    (
        "KEK reference too long",
        _op("open_value", WRAPPED_ENVELOPE[:4] + b"\xff\xff" + WRAPPED_ENVELOPE[6:]),
        "MalformedEnvelope",
    ),
    ("KEK reference not UTF-8", _op("open_value", _flip(WRAPPED_ENVELOPE, 6, 0xFF)), "MalformedEnvelope"),
    ("KEK reference without provider", _op("open_value", _flip(WRAPPED_ENVELOPE, 11, ord("-"))), "MalformedEnvelope"),
    (
        "EDEK length 0",
        _op("open_value", WRAPPED_ENVELOPE[:17] + b"\x00\x00" + WRAPPED_ENVELOPE[19:]),
        "MalformedEnvelope",
    ),
    ("oversized topic on seal", _op("seal_value", b"x", topic="t" * 70_000), "EncodingLimitExceeded"),
    ("oversized topic on open", _op("open_value", ENVELOPE, topic="t" * 70_000), "EncodingLimitExceeded"),
    ("oversized field path on seal", _op("seal_value", b"x", field_path="$." + LONG_NAME), "EncodingLimitExceeded"),
    ("a 31-byte DEK", _op("seal_value", b"x", dek_hex=bytes(31).hex()), "InvalidDek"),
    ("a large value seals", _op("seal_value", bytes(1_000_000)), "ok"),
    # field mode: not JSON, not an object
    ("not UTF-8", _fields("seal", b'{"email":"\xff"}', ["$.email"]), "NotJson"),
    ("a UTF-8 encoded surrogate", _fields("open", b'{"email":"\xed\xa0\x80"}'), "NotJson"),
    ("garbage document", _fields("open", "not json"), "NotJson"),
    ("byte order mark", _fields("seal", '\ufeff{"email":"a"}', ["$.email"]), "NotJson"),
    ("trailing data", _fields("seal", '{"email":"a"} x', ["$.email"]), "NotJson"),
    ("two documents", _fields("open", "{}{}"), "NotJson"),
    ("trailing whitespace is fine", _fields("seal", '{"email":"a"} \n\t', ["$.email"]), "ok"),
    ("an array", _fields("seal", "[1]", ["$.email"]), "NotJsonObject"),
    ("a number", _fields("open", "1"), "NotJsonObject"),
    ("null", _fields("open", "null"), "NotJsonObject"),
    *[
        (f"not RFC 8259: {doc}", _fields("seal", doc, ["$.a"]), "NotJson")
        for doc in (
            '{"a":NaN}',
            '{"a":Infinity}',
            '{"a":-Infinity}',
            '{"a":01}',
            '{"a":1.}',
            '{"a":.5}',
            '{"a":+1}',
            "{'a':1}",
            '{"a":1,}',
            '{"a":1}//',
            "{a:1}",
            '{"a":"\\x"}',
            '{"a":"\x01"}',
            '{"a":[1,]}',
            '{"a" 1}',
        )
    ],
    # duplicate member names
    ("duplicate member", _fields("seal", '{"email":"a","email":"b"}', ["$.email"]), "NotJson"),
    ("nested duplicate member", _fields("open", '{"x":{"y":1,"y":2}}'), "NotJson"),
    ("duplicate hiding an envelope", _fields("open", f'{{"email":"a","email":"{EMAIL}"}}', ["$.email"]), "NotJson"),
    # lone surrogates
    ("lone surrogate in a value", _fields("seal", '{"email":"\\ud800"}', ["$.email"]), "NotJson"),
    ("lone surrogate elsewhere", _fields("seal", '{"email":"a","b":"\\udfff"}', ["$.email"]), "NotJson"),
    ("lone surrogate in a name", _fields("open", '{"\\ud800":1}'), "NotJson"),
    ("reversed pair", _fields("open", '{"a":"\\udc00\\ud800"}'), "NotJson"),
    ("valid escaped pair", _fields("seal", '{"email":"\\ud83c\\udf89"}', ["$.email"]), "ok"),
    # numbers and depth
    ("1e400 in a rule field", _fields("seal", '{"email":1e400}', ["$.email"]), "NotJson"),
    ("1e400 elsewhere, written back", _fields("seal", '{"email":"a","n":1e400}', ["$.email"]), "NotJson"),
    ("1e400, nothing to seal", _fields("seal", '{"n":1e400}', ["$.email"]), "ok"),
    ("4300-digit integer", _fields("seal", '{"email":' + "9" * 4300 + "}", ["$.email"]), "ok"),
    ("4301-digit integer", _fields("seal", '{"email":' + "9" * 4301 + "}", ["$.email"]), "NotJson"),
    *[
        (
            f"floats written as Python does {i}",
            _fields("seal", f'{{"email":[{floats}],"n":{floats.split(",")[0]}}}', ["$.email"]),
            "ok",
        )
        for i, floats in enumerate(
            (
                "1E2,1e16,1e-5,0.0001,-0.0,5e-324,1.5e300",
                "1e22,1e23,9.9e-324,2.5e-323,0.3,2e-7,123456789012345678.0",
                "1.7976931348623157e308,2.2250738585072014e-308,4.9406564584124654e-324,9007199254740993,0.1e1",
                "1e15,1e-4,-1e-5,1.0e0,100.0e-2,5e-1,5.5e16,2e15",
            )
        )
    ],
    ("nesting 5000 deep", _fields("seal", DEEP, ["$.email"]), "NotJson"),
    ("nesting 100 deep", _fields("seal", SHALLOW, ["$.a"]), "ok"),
    # things that look encrypted
    (
        "stray envelope outside the rules",
        _fields("seal", f'{{"email":"a","note":"{EMAIL}"}}', ["$.email"]),
        "StrayEnvelope",
    ),
    ("presealed field that opens here", _fields("seal", f'{{"email":"{EMAIL}"}}', ["$.email"]), "ok"),
    (
        "presealed field of another topic",
        _fields("seal", f'{{"email":"{EMAIL}"}}', ["$.email"], topic="x"),
        "UnverifiedEnvelope",
    ),
    ("presealed field at another path", _fields("seal", f'{{"mail":"{EMAIL}"}}', ["$.mail"]), "UnverifiedEnvelope"),
    (
        "sr1: garbage at a rule field (seal)",
        _fields("seal", '{"email":"sr1:hello"}', ["$.email"]),
        "UnverifiedEnvelope",
    ),
    ("sr1: garbage at a rule field (open)", _fields("open", '{"email":"sr1:hello"}', ["$.email"]), "MalformedEnvelope"),
    ("sr1: garbage, no rules", _fields("open", '{"email":"sr1:hello"}'), "MalformedEnvelope"),
    (
        "sr1: garbage outside the rules is left alone",
        _fields("open", f'{{"email":"{EMAIL}","n":"sr1:x"}}', ["$.email"]),
        "ok",
    ),
    *[
        (f"sr1: base64 {text!r}", _fields("open", f'{{"email":"sr1:{text}"}}'), kind)
        for text, kind in (
            ("QQ", "MalformedEnvelope"),
            ("QQ=", "MalformedEnvelope"),
            ("Q===", "MalformedEnvelope"),
            ("QQ==QQ==", "MalformedEnvelope"),
            ("=QQ=", "MalformedEnvelope"),
            ("QU JD", "MalformedEnvelope"),
            ("QR==", "MalformedEnvelope"),  # the bytes of QQ==, spelt with an unused bit set
            ("9QE=", "MalformedEnvelope"),
            ("9QF=", "MalformedEnvelope"),
            ("", "NotAnEnvelope"),
        )
    ],
    # the same envelope bytes spelt otherwise: strongroom writes one spelling (canonical base64), so it was crafted
    ("excess padding after a sealed field", _fields("open", f'{{"email":"{EMAIL}="}}'), "MalformedEnvelope"),
    ("four excess padding characters", _fields("open", f'{{"email":"{EMAIL}===="}}', ["$.email"]), "MalformedEnvelope"),
    ("unused bits set", _fields("open", f'{{"email":"{respelt(PADDED_EMAIL)}"}}'), "MalformedEnvelope"),
    ("the padded field spelt canonically opens", _fields("open", f'{{"email":"{PADDED_EMAIL}"}}'), "ok"),
    ("a presealed field respelt", _fields("seal", f'{{"email":"{EMAIL}="}}', ["$.email"]), "UnverifiedEnvelope"),
    (
        "escaped sr1: spelling (seal)",
        _fields("seal", '{"email":"\\u0073' + EMAIL[1:] + '"}', ["$.email"]),
        "MalformedEnvelope",
    ),
    ("escaped sr1: spelling (open)", _fields("open", '{"email":"\\u0073' + EMAIL[1:] + '"}'), "MalformedEnvelope"),
    (
        "escaped slash in an envelope",
        _fields("open", '{"email":"' + EMAIL.replace("/", "\\/") + '"}'),
        "MalformedEnvelope" if "/" in EMAIL else "ok",
    ),
    ("plaintext at a rule field", _fields("open", '{"email":"ann@example.com"}', ["$.email"]), "UnencryptedField"),
    ("a field that decrypts to non-JSON", _fields("open", f'{{"email":"{NOT_JSON_FIELD}"}}'), "MalformedEnvelope"),
    ("a field that decrypts to a duplicate", _fields("open", f'{{"email":"{DUPLICATE_FIELD}"}}'), "MalformedEnvelope"),
    ("a field moved to another path", _fields("open", f'{{"y":"{MOVED}"}}'), "IntegrityError"),
    ("a field under a 70000-byte path", _fields("open", f'{{"{LONG_NAME}":"{MOVED}"}}'), "EncodingLimitExceeded"),
    (
        "a 70000-byte rule path on seal",
        _fields("seal", f'{{"{LONG_NAME}":1}}', [f"$.{LONG_NAME}"]),
        "EncodingLimitExceeded",
    ),
    ("an unknown key id in a field", _fields("open", f'{{"email":"{UNKNOWN_KEY_FIELD}"}}'), "UnknownKey"),
    (
        "an erased field becomes null",
        _fields("open", f'{{"email":"{EMAIL}"}}', keys=[{"key_ref": key_ref_json(REF), "dek_hex": None}]),
        "ok",
    ),
    (
        "an erased field raises",
        _fields(
            "open", f'{{"email":"{EMAIL}"}}', keys=[{"key_ref": key_ref_json(REF), "dek_hex": None}], on_erased="raise"
        ),
        "SubjectErased",
    ),
    ("a lone surrogate sealed inside a field", _fields("open", f'{{"email":"{SURROGATE_FIELD}"}}'), "NotJson"),
    # rules
    ("an array index in a rule", _fields("seal", '{"a":[1]}', ["$.a[0]"]), "InvalidFieldPath"),
    ("overlapping rules", _fields("seal", '{"a":{"b":1}}', ["$.a", "$.a.b"]), "InvalidFieldPath"),
    ("a rule naming the whole value", _fields("seal", '{"a":1}', ["$"]), "InvalidFieldPath"),
    ("a rule starting with [*]", _fields("seal", '{"a":1}', ["$[*].a"]), "InvalidFieldPath"),
    ("a bad quoted rule", _fields("seal", '{"a":1}', ['$["a]']), "InvalidFieldPath"),
    (
        "quoted and plain rules are one path",
        _fields("seal", '{"a b":1,"c":[{"d":2}]}', ['$["a b"]', '$["c"][*]["d"]']),
        "ok",
    ),
]


@pytest.mark.parametrize(("name", "op", "expected"), CASES, ids=[name for name, _, _ in CASES])
def test_both_engines_agree(name: str, op: Operation, expected: str, jvm_outcomes: dict[str, dict[str, Any]]) -> None:
    python = run_python(op)
    jvm = jvm_outcomes[name]
    assert kind_of(python) == expected, python
    assert kind_of(jvm) == expected, jvm
    assert python == jvm


@pytest.fixture(scope="module")
def jvm_outcomes() -> dict[str, dict[str, Any]]:
    """Every case through one JVM (one process for the whole table)."""
    names = [name for name, _, _ in CASES]
    assert len(set(names)) == len(names)
    return dict(zip(names, run_java([op for _, op, _ in CASES]), strict=True))


def test_every_outcome_kind_is_exercised() -> None:
    kinds = {expected for _, _, expected in CASES}
    assert len(kinds) >= 18, kinds
    assert json.dumps(sorted(kinds))


def test_the_jvm_refuses_a_lone_surrogate_where_the_aad_needs_utf8() -> None:
    """A topic, field path or KEK reference with a lone surrogate has no UTF-8 form. The JDK's encoder would
    write '?' for it (a silently different AAD), so the JVM refuses it. (The Python codec raises
    UnicodeEncodeError here, outside its error hierarchy; Kafka topic names cannot hold such a character.)"""
    ops = [
        _op("seal_value", b"x", field_path='$["\ud800"]'),
        _op("seal_value", b"x", topic="orders\udc00"),
        _op("open_value", ENVELOPE, topic="\ud800"),
        _op("seal_value", b"x", key_ref={"kind": "wrapped_dek", "kek_ref": "local:\ud800", "edek_hex": "01"}),
    ]
    kinds = [kind_of(outcome) for outcome in run_java(ops)]
    assert kinds == ["EncodingLimitExceeded"] * 3 + ["InvalidKeyRef"]
