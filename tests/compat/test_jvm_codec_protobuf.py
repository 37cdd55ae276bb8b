"""Schema mode (Protobuf) of the JVM codec against the Python one, on a schema with every construct tags reach.

The driver compiles the ``.proto`` text with protoc and sends the descriptors with each message's targets
(``strongroom.spark.schema_plans``); the JVM reads payloads with protobuf-java's ``DynamicMessage``. Proven on
random messages of a file with two top-level messages and a nested one (so several message indexes), a
message whose tagged field is an ``int64`` (refused for its records only), tagged strings, bytes, an
``optional`` string, a oneof with a tagged member, repeated strings, maps of strings keyed by strings and
by integers, repeated and mapped
messages holding tagged strings, enums, integers and doubles:

* with the same fixed nonces both engines write the same bytes (map entries sorted by key on both);
* each opens what the other sealed, to the original message;
* an erased key reads the same on both (an optional field unset, others empty);
* hostile input (truncated indexes, an index naming no message, bytes that do not parse, unknown fields,
  the refused message) takes the same outcome kind and reason on both engines.

Needs a JVM (one ``java`` process per batch, no Spark, no Kafka), hence ``integration``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from jvm_codec import (
    Operation,
    assert_each_opens_the_other,
    driver_plans,
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

SCHEMA_ID = 13
PROTO = """
syntax = "proto3";
package shop;
import "confluent/meta.proto";

message Customer {
  string id = 1;
  string email = 2 [(confluent.field_meta).tags = "PII"];
  optional string name = 3 [(confluent.field_meta).tags = "PII"];
  bytes photo = 4 [(confluent.field_meta).tags = "PII"];
  repeated string phones = 5 [(confluent.field_meta).tags = "PII"];
  map<string, string> notes = 6 [(confluent.field_meta).tags = "PII"];
  Address home = 7;
  repeated Address past = 8;
  map<string, Address> by_label = 9;
  Tier tier = 10;
  int64 age = 11;
  oneof reach {
    string phone = 12 [(confluent.field_meta).tags = "PII"];
    int32 extension = 13;
  }
  double score = 14;
  map<int64, string> codes = 15 [(confluent.field_meta).tags = "PII"];
  message Address {
    string street = 1 [(confluent.field_meta).tags = "PII"];
    string city = 2;
  }
}
enum Tier {
  GOLD = 0;
  SILVER = 1;
}
message Order {
  string order_id = 1;
  string card = 2 [(confluent.field_meta).tags = "PII"];
  Customer.Address ship_to = 3;
}
message Bad {
  int64 ssn = 1 [(confluent.field_meta).tags = "PII"];
}
"""
CHARS = ["a", "z", " ", "é", "名", "🎉", "\x00", "\n", "sr1", ":", "\\", '"', "\ufeff"]


def _plans() -> tuple[dict[str, Any], Any]:
    """The driver's answer for the schema id, made by the driver's own code, and the Python-side format."""
    plans = driver_plans("PROTOBUF", PROTO, SCHEMA_ID)
    answer = plans.answer({"topic": "source", "schema_id": SCHEMA_ID})
    return answer, plans.fields_for(plans.rules.rule_for("source")).plan(SCHEMA_ID)._proto


PLAN, FORMAT = _plans()


def _indexes(name: str) -> list[int]:
    """The Confluent message indexes of a message of the file by its full name."""

    def search(descriptors: list[Any], path: list[int]) -> list[int] | None:
        for index, descriptor in enumerate(descriptors):
            if descriptor.full_name == name:
                return [*path, index]
            found = search(list(descriptor.nested_types), [*path, index])
            if found is not None:
                return found
        return None

    found = search(list(FORMAT.file.message_types_by_name.values()), [])
    assert found is not None, name
    return found


def _zigzag(number: int) -> bytes:
    value = (number << 1) ^ (number >> 63)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _index_bytes(indexes: list[int]) -> bytes:
    return b"\x00" if indexes == [0] else _zigzag(len(indexes)) + b"".join(map(_zigzag, indexes))


def _text(rng: random.Random, most: int = 12) -> str:
    return random_text(rng, CHARS, most)


def _record(rng: random.Random) -> bytes:
    """A random framed record of Customer, Order or Customer.Address."""
    kind = rng.choice(["shop.Customer", "shop.Customer", "shop.Order", "shop.Customer.Address"])
    indexes = _indexes(kind)
    cls, _ = FORMAT.message(indexes)
    if kind == "shop.Customer.Address":
        message = cls(street=_text(rng), city=_text(rng))
    elif kind == "shop.Order":
        message = cls(order_id=f"o-{rng.randint(0, 9)}", card=_text(rng))
        if rng.random() < 0.5:
            message.ship_to.street = _text(rng)
    else:
        message = cls(id=f"c-{rng.randint(0, 99)}", email=_text(rng), photo=rng.randbytes(rng.randint(0, 20)))
        message.tier = rng.choice([0, 1])
        message.age = rng.randint(-(2**40), 2**40)
        message.score = rng.choice([0.1, -2.5, 1e300])
        if rng.random() < 0.5:
            message.name = _text(rng)
        message.phones.extend(_text(rng) for _ in range(rng.randint(0, 3)))
        for _ in range(rng.randint(0, 4)):
            message.notes[_text(rng, 4)] = _text(rng)
        if rng.random() < 0.6:
            message.home.street = _text(rng)
            message.home.city = _text(rng)
        for _ in range(rng.randint(0, 2)):
            message.past.add(street=_text(rng), city=_text(rng))
        for _ in range(rng.randint(0, 3)):
            message.by_label[_text(rng, 4)].street = _text(rng)
        for _ in range(rng.randint(0, 4)):
            message.codes[rng.choice([0, 1, -1, 5, -(2**40), 2**40, 2**63 - 1, -(2**63)])] = _text(rng)
        reach = rng.choice(["phone", "extension", None])
        if reach == "phone":
            message.phone = _text(rng)
        elif reach == "extension":
            message.extension = rng.randint(0, 999)
    return frame(SCHEMA_ID, _index_bytes(indexes) + message.SerializeToString(deterministic=True))


def _sealing(rng: random.Random, value: bytes, **extra: Any) -> Operation:
    return schema_sealing(rng, value, SCHEMA_ID, PLAN, schema_text=PROTO, **extra)


def test_the_plan_names_each_messages_targets_and_refuses_the_tagged_int_alone() -> None:
    assert PLAN["type"] == "PROTOBUF"
    customer = PLAN["messages"][".".join(map(str, _indexes("shop.Customer")))]
    assert [t["path"] for t in customer["targets"]] == [
        "$.email", "$.name", "$.photo", "$.phones[*]", "$.notes[*]", "$.home.street", "$.past[*].street",
        "$.by_label[*].street", "$.phone", "$.codes[*]",
    ]  # fmt: skip
    assert PLAN["messages"][".".join(map(str, _indexes("shop.Order")))]["targets"][0]["path"] == "$.card"
    assert PLAN["messages"][".".join(map(str, _indexes("shop.Bad")))]["refused"]["kind"] == "TaggedFieldType"


def test_python_and_the_jvm_seal_the_same_bytes_with_the_same_nonces() -> None:
    rng = random.Random("protobuf-same-bytes")
    ops = [_sealing(rng, _record(rng), nonces_hex=[rng.randbytes(12).hex() for _ in range(40)]) for _ in range(200)]
    mismatches = [(op, py, jvm) for op, py, jvm in pairs(ops) if py != jvm]
    assert not mismatches, mismatches[:3]
    assert all(kind_of(run_python(op)) == "ok" for op in ops)


def test_each_engine_opens_what_the_other_sealed_to_the_original_message() -> None:
    rng = random.Random("protobuf-cross")
    originals = [_record(rng) for _ in range(150)]
    assert_each_opens_the_other(originals, [_sealing(rng, value) for value in originals])


def test_an_erased_key_reads_alike_on_both_engines() -> None:
    rng = random.Random("protobuf-erased")
    sealings = [_sealing(rng, _record(rng)) for _ in range(60)]
    openings = [schema_opening(op, run_python(op)["output_hex"], erased=True) for op in sealings]
    mismatches = [(op, py, jvm) for op, py, jvm in pairs(openings) if py != jvm or not jvm["ok"]]
    assert not mismatches, mismatches[:3]


def test_a_map_key_given_twice_keeps_its_last_value_on_both_engines() -> None:
    rng = random.Random("protobuf-twice")
    cls, _ = FORMAT.message(_indexes("shop.Customer"))
    first, last = cls(id="c-1"), cls()
    first.notes["k"] = "the earlier value"
    last.notes["k"] = "the value that counts"
    # two serialized messages one after the other are one message: the map entry of "k" comes twice
    payload = _index_bytes(_indexes("shop.Customer")) + first.SerializeToString() + last.SerializeToString()
    op = _sealing(rng, frame(SCHEMA_ID, payload), nonces_hex=[rng.randbytes(12).hex() for _ in range(4)])
    [(_, py, jvm)] = list(pairs([op]))
    assert py == jvm
    assert jvm["ok"], jvm
    opened = run_python(schema_opening(op, jvm["output_hex"]))
    back = cls()
    back.ParseFromString(bytes.fromhex(opened["output_hex"])[6:])
    assert dict(back.notes) == {"k": "the value that counts"}
    assert b"the earlier value" not in bytes.fromhex(jvm["output_hex"]), "the shadowed value is not carried on"


def _hostile(rng: random.Random) -> list[tuple[str, Operation]]:
    good = _record(rng)
    customer = _index_bytes(_indexes("shop.Customer"))
    cls, _ = FORMAT.message(_indexes("shop.Customer"))
    plain = _sealing(rng, frame(SCHEMA_ID, customer + cls(id="c-1", email="ann@example.com").SerializeToString()))
    bad_cls, _ = FORMAT.message(_indexes("shop.Bad"))
    bad = _index_bytes(_indexes("shop.Bad")) + bad_cls(ssn=123).SerializeToString()
    return [
        ("NotFramed", _sealing(rng, b"\x01" + good[1:])),
        ("PayloadMismatch", _sealing(rng, frame(SCHEMA_ID, b"\x02"))),  # one index announced, none follows
        ("PayloadMismatch", _sealing(rng, frame(SCHEMA_ID, b"\x02\x0e"))),  # index 7: no such message
        ("PayloadMismatch", _sealing(rng, frame(SCHEMA_ID, b"\x01\x02"))),  # a negative count
        ("PayloadMismatch", _sealing(rng, frame(SCHEMA_ID, customer + b"\x12\x05ab"))),  # a string cut short
        ("PayloadMismatch", _sealing(rng, frame(SCHEMA_ID, customer + b"\xf8\x07\x01"))),  # unknown field 127
        ("PayloadMismatch", _sealing(rng, frame(SCHEMA_ID, customer + b"\x3a\x03\xf8\x07\x01"))),  # unknown, nested
        ("TaggedFieldType", _sealing(rng, frame(SCHEMA_ID, bad))),
        ("UnencryptedField", schema_opening(plain, plain["input_hex"])),
        ("IntegrityError", schema_opening(plain, run_python(plain)["output_hex"]) | {"topic": "moved-elsewhere"}),
    ]


def test_hostile_input_takes_the_same_outcome_and_reason_on_both_engines() -> None:
    rng = random.Random("protobuf-hostile")
    cases = _hostile(rng)
    outcomes = list(pairs([op for _, op in cases]))
    for (expected, _), (op, py, jvm) in zip(cases, outcomes, strict=True):
        assert kind_of(py) == kind_of(jvm), (expected, op, py, jvm)
        assert kind_of(jvm) == expected, (expected, jvm)
    refused = [op for expected, op in cases if expected in ("PayloadMismatch", "TaggedFieldType")]
    for op, jvm in zip(refused, run_java(refused, messages=True), strict=True):
        problem = python_problem(op)
        assert jvm["message"].startswith(problem + " ("), (problem, jvm["message"])
