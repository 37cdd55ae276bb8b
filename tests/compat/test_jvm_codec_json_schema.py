"""Schema mode (JSON Schema) of the JVM codec against the Python one, on a schema with every construct tags reach.

The JVM reads the payload strictly, validates it with networknt's validator before sealing, seals the fields
the driver's plan names and writes the document back as Python writes it. Proven here on random documents of a
schema with a nested object, a local ``$ref``, a nullable string, arrays and maps of tagged strings and untagged
numbers of every shape Python renders (floats, big integers, -0.0, exponents), booleans and nulls:

* with the same fixed nonces both engines write the same bytes;
* each opens what the other sealed (with fresh nonces), to the original document;
* an erased key reads the same on both (null where the schema allows, else the empty string);
* hostile input (not JSON, duplicate members, a lone surrogate escape, a document its schema refuses, a tagged
  field holding a number) takes the same outcome kind on both engines, and a refused document the same reason.

Needs a JVM (one ``java`` process per batch, no Spark, no Kafka), hence ``integration``.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from jvm_codec import (
    Operation,
    assert_each_opens_the_other,
    driver_plan,
    kind_of,
    pairs,
    python_problem,
    random_text,
    run_java,
    run_python,
    schema_opening,
    schema_sealing,
)

from strongroom.schemas.wire import frame

pytestmark = pytest.mark.integration

SCHEMA_ID = 11
CHARS = ["a", "z", " ", "é", "名", "🎉", "\x00", "\n", "\u2028", "sr1", ":", "\\", '"', "\ufeff", "/", "\x7f"]
SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "definitions": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string", "confluent:tags": ["PII"]}, "city": {"type": "string"}},
            "required": ["street"],
        }
    },
    "properties": {
        "id": {"type": "string"},
        "email": {"type": "string", "confluent:tags": ["PII"]},
        "name": {"type": ["string", "null"], "confluent:tags": ["PII"]},
        "phones": {"type": "array", "items": {"type": "string"}, "confluent:tags": ["PII"]},
        "notes": {"type": "object", "additionalProperties": {"type": "string"}, "confluent:tags": ["PII"]},
        "home": {"$ref": "#/definitions/address"},
        "score": {"type": "number"},
        "count": {"type": "integer"},
        "active": {"type": "boolean"},
        "extra": {},
    },
    "required": ["id", "email", "count"],
}
#: Where a reason goes on in the JSON parser's own words (json's and Jackson's differ).
PARSER_DIAGNOSIS = "value is not JSON: "
FLOATS = [0.1, -0.0, 1e16, 1.5e-7, 123456789.125, 2.5, 1e300, -3.0]


def _text(rng: random.Random, most: int = 12) -> str:
    return random_text(rng, CHARS, most)


def _document(rng: random.Random) -> dict[str, Any]:
    document: dict[str, Any] = {
        "id": f"c-{rng.randint(0, 99)}",
        "email": _text(rng),
        "count": rng.choice([0, -7, 2**40, 2**70, -(2**64)]),
    }
    optional: dict[str, Any] = {
        "name": rng.choice([None, _text(rng)]),
        "phones": [_text(rng) for _ in range(rng.randint(0, 3))],
        "notes": {f"k{i}{_text(rng, 3)}": _text(rng) for i in range(rng.randint(0, 4))},
        "home": {"street": _text(rng), **({"city": _text(rng)} if rng.random() < 0.5 else {})},
        "score": rng.choice(FLOATS),
        "active": rng.random() < 0.5,
        "extra": rng.choice([None, [1, 2.0, "x"], {"deep": {"er": [True, None]}}]),
    }
    for name in rng.sample(sorted(optional), rng.randint(0, len(optional))):
        document[name] = optional[name]
    members = list(document.items())
    rng.shuffle(members)  # member order is kept as it came
    return dict(members)


def _payload(document: dict[str, Any], *, ascii_only: bool = False) -> bytes:
    text = json.dumps(document, ensure_ascii=ascii_only, separators=(", ", ": ") if ascii_only else (",", ":"))
    return frame(SCHEMA_ID, text.encode("utf-8"))


PLAN = driver_plan("JSON", json.dumps(SCHEMA), SCHEMA_ID)


def _sealing(rng: random.Random, value: bytes, **extra: Any) -> Operation:
    return schema_sealing(rng, value, SCHEMA_ID, PLAN, **extra)


def test_the_plan_is_a_json_schema_plan_naming_every_tagged_string() -> None:
    assert PLAN["type"] == "JSON"
    assert json.loads(PLAN["schema"]) == SCHEMA
    paths = [t["path"] for t in PLAN["targets"]]
    assert paths == ["$.email", "$.name", "$.phones[*]", "$.notes[*]", "$.home.street"]


def test_python_and_the_jvm_seal_the_same_bytes_with_the_same_nonces() -> None:
    rng = random.Random("json-schema-same-bytes")
    ops = [
        _sealing(
            rng,
            _payload(_document(rng), ascii_only=rng.random() < 0.3),
            nonces_hex=[rng.randbytes(12).hex() for _ in range(40)],
        )
        for _ in range(200)
    ]
    mismatches = [(op, py, jvm) for op, py, jvm in pairs(ops) if py != jvm]
    assert not mismatches, mismatches[:3]
    assert all(kind_of(run_python(op)) == "ok" for op in ops)


def test_each_engine_opens_what_the_other_sealed_to_the_original_document() -> None:
    rng = random.Random("json-schema-cross")
    originals = [_payload(_document(rng)) for _ in range(150)]
    by_java = assert_each_opens_the_other(originals, [_sealing(rng, value) for value in originals])
    for java in by_java:
        sealed = json.loads(bytes.fromhex(java["output_hex"])[5:])
        assert sealed["email"].startswith("sr1:"), "the tagged field is sealed in place"


def test_an_erased_key_reads_alike_on_both_engines() -> None:
    rng = random.Random("json-schema-erased")
    sealings = [_sealing(rng, _payload({**_document(rng), "name": "Ada"})) for _ in range(40)]
    openings = [schema_opening(op, run_python(op)["output_hex"], erased=True) for op in sealings]
    mismatches = [(op, py, jvm) for op, py, jvm in pairs(openings) if py != jvm or not jvm["ok"]]
    assert not mismatches, mismatches[:3]
    document = json.loads(bytes.fromhex(run_python(openings[0])["output_hex"])[5:])
    assert document["email"] == ""
    assert document["name"] is None


def _json_plan(schema: dict[str, Any]) -> dict[str, Any]:
    return driver_plan("JSON", json.dumps(schema), SCHEMA_ID)


@pytest.mark.parametrize(
    "draft",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ],
)
def test_every_draft_the_jvm_reads_seals_and_refuses_alike(draft: str) -> None:
    rng = random.Random(draft)
    schema = {**SCHEMA, "$schema": draft}
    if "/draft/" in draft:  # 2019-09 on: definitions are $defs
        schema["$defs"] = schema.pop("definitions")
        schema["properties"] = {**SCHEMA["properties"], "home": {"$ref": "#/$defs/address"}}
    plan = _json_plan(schema)
    ops = [
        _sealing(
            rng, _payload(_document(rng)), schema_plan=plan, nonces_hex=[rng.randbytes(12).hex() for _ in range(40)]
        )
        for _ in range(20)
    ]
    ops.append(_sealing(rng, _payload({**_document(rng), "count": "seven"}), schema_plan=plan))
    outcomes = [(kind_of(py), py == jvm) for _, py, jvm in pairs(ops)]
    assert outcomes == [("ok", True)] * 20 + [("PayloadMismatch", True)]


def test_draft_3_runs_on_the_python_engine_only_and_the_jvm_names_it() -> None:
    rng = random.Random("draft-3")
    plan = _json_plan(
        {k: v for k, v in SCHEMA.items() if k != "required"} | {"$schema": "http://json-schema.org/draft-03/schema#"}
    )
    op = _sealing(rng, _payload(_document(rng)), schema_plan=plan)
    assert kind_of(run_python(op)) == "ok"
    [jvm] = run_java([op], messages=True)
    assert jvm["kind"] == "UnsupportedSchema"
    assert "run this pipeline with --engine python" in jvm["message"]


def _hostile(rng: random.Random) -> list[tuple[str, Operation]]:
    good_document = _document(rng)
    good = _payload(good_document)
    plain = _sealing(rng, good)
    presealed = bytes.fromhex(run_python(_sealing(rng, good))["output_hex"])
    header = good[:5]
    return [
        ("NotFramed", _sealing(rng, b"\x01" + good[1:])),
        ("PayloadMismatch", _sealing(rng, header + b'{"id": "c-1", ')),
        ("PayloadMismatch", _sealing(rng, header + b'["not", "an", "object"]')),
        ("PayloadMismatch", _sealing(rng, header + b'{"id":"a","id":"b","email":"x","count":1}')),
        ("PayloadMismatch", _sealing(rng, header + b'{"id":"a","email":"\\ud800","count":1}')),
        ("PayloadMismatch", _sealing(rng, header + b"\xff\xfe")),
        # refused by the schema: each of these would otherwise be sealed and written
        ("PayloadMismatch", _sealing(rng, _payload({**good_document, "count": "seven"}))),
        ("PayloadMismatch", _sealing(rng, _payload({"id": "a", "count": 1}))),
        ("PayloadMismatch", _sealing(rng, _payload({**good_document, "email": 42}))),
        ("PayloadMismatch", _sealing(rng, _payload({**good_document, "home": {"city": "x"}}))),
        ("PayloadMismatch", _sealing(rng, _payload({**good_document, "phones": ["a", 7]}))),
        # a field already holding an envelope sealed for another subject key is refused, not kept
        ("UnverifiedEnvelope", {**plain, "input_hex": presealed.hex()}),
        # opening: plaintext where ciphertext is promised, a number where an envelope should be, a moved record
        ("UnencryptedField", schema_opening(plain, good.hex())),
        ("PayloadMismatch", schema_opening(plain, _payload({**good_document, "email": 42}).hex())),
        ("IntegrityError", schema_opening(plain, run_python(plain)["output_hex"]) | {"topic": "moved-elsewhere"}),
    ]


def test_hostile_input_takes_the_same_outcome_and_reason_on_both_engines() -> None:
    rng = random.Random("json-schema-hostile")
    cases = _hostile(rng)
    outcomes = list(pairs([op for _, op in cases]))
    for (expected, _), (op, py, jvm) in zip(cases, outcomes, strict=True):
        assert kind_of(py) == kind_of(jvm), (expected, op, py, jvm)
        assert kind_of(jvm) == expected, (expected, jvm)
    mismatches = [op for expected, op in cases if expected == "PayloadMismatch"]
    for op, jvm in zip(mismatches, run_java(mismatches, messages=True), strict=True):
        problem = python_problem(op)
        if PARSER_DIAGNOSIS in problem:  # the JSON parsers' own words differ, as in JSON field mode
            problem = problem[: problem.index(PARSER_DIAGNOSIS) + len(PARSER_DIAGNOSIS)]
            assert jvm["message"].startswith(problem), (problem, jvm["message"])
        else:
            assert jvm["message"].startswith(problem + " ("), (problem, jvm["message"])
