"""One codec call, run on both engines: the Python codec in-process and the JVM codec through the jar.

An operation is a JSON object (the protocol of ``io.strongroom.dataplane.tools.CodecTool ops``)::

    {"op": "seal_value" | "open_value" | "seal_fields" | "open_fields" | "seal_schema" | "open_schema"
           | "parse_marker", "input_hex", "dek_hex",
     "key_ref": {"kind": "subject_key", "key_id_hex"} | {"kind": "wrapped_dek", "kek_ref", "edek_hex"},
     "topic", "subject_hex", "profile": "topic" | "portable", "field_path", "rules",
     "nonces_hex" (fixed nonces, tests only), "keys": [{"key_ref", "dek_hex" or null (erased)}],
     "on_erased": "null" | "raise", "topic_map",
     schema mode: "schema_id", "selection": {"tags", "paths"}, "schema_plan" (the driver's answer for the id),
                  "schema_text" (Protobuf: the registered .proto text)}

and its outcome is ``{"ok": true, "output_hex"}`` or ``{"ok": false, "kind": <error class name>}``. The
kind of a refusal is the name of the Python error class; the JVM reports the same names.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import (
    AadProfile,
    KeyRef,
    RecordContext,
    SubjectKeyRef,
    WrappedDekRef,
    decrypt_json_fields,
    decrypt_value,
    encrypt_json_fields,
    parse_marker,
    seal,
)
from strongroom.errors import StrongroomError
from strongroom.rules import EncryptionRules
from strongroom.schemas.fields import Selection
from strongroom.schemas.registry import RegisteredSchema, RegistrySettings, SchemaRegistry
from strongroom.schemas.sealing import SchemaFields
from strongroom.spark.dataplane import runtime_classpath
from strongroom.spark.schema_plans import SchemaPlans

Operation = dict[str, Any]
Outcome = dict[str, Any]


class UnknownKey(LookupError):
    """The operation's key table has no entry for the envelope's key reference."""


def key_ref_json(ref: KeyRef) -> dict[str, str]:
    if isinstance(ref, SubjectKeyRef):
        return {"kind": "subject_key", "key_id_hex": ref.key_id.hex()}
    return {"kind": "wrapped_dek", "kek_ref": ref.kek_ref, "edek_hex": ref.edek.hex()}


def _key_ref(spec: dict[str, str]) -> KeyRef:
    if spec["kind"] == "subject_key":
        return SubjectKeyRef(bytes.fromhex(spec["key_id_hex"]))
    return WrappedDekRef(spec["kek_ref"], bytes.fromhex(spec["edek_hex"]))


def _nonces(op: Operation) -> contextlib.AbstractContextManager[None]:
    if "nonces_hex" not in op:
        return contextlib.nullcontext()
    return fixed_nonces_for_vectors([bytes.fromhex(n) for n in op["nonces_hex"]])


def _lookup(op: Operation) -> Any:
    table = {
        _key_ref(entry["key_ref"]): None if entry["dek_hex"] is None else bytes.fromhex(entry["dek_hex"])
        for entry in op.get("keys", [])
    }

    def lookup(ref: KeyRef) -> bytes | None:
        if ref not in table:
            raise UnknownKey(repr(ref))
        return table[ref]

    return lookup


def _python_output(op: Operation) -> bytes:
    value = bytes.fromhex(op["input_hex"])
    if op["op"] == "parse_marker":
        return bytes((parse_marker(value).mode,))
    ctx = RecordContext(op["topic"], bytes.fromhex(op["subject_hex"]), AadProfile[op.get("profile", "topic").upper()])
    topic_map = op.get("topic_map") or None
    with _nonces(op):
        if op["op"] in ("seal_schema", "open_schema"):
            return _schema_output(op, value, ctx)
        if op["op"] == "seal_value":
            dek, ref = bytes.fromhex(op["dek_hex"]), _key_ref(op["key_ref"])
            return seal(value, dek, ref, ctx, op.get("field_path", ""))
        if op["op"] == "open_value":
            return decrypt_value(value, _lookup(op), ctx, topic_map=topic_map)
        if op["op"] == "seal_fields":
            return encrypt_json_fields(value, op["rules"], bytes.fromhex(op["dek_hex"]), _key_ref(op["key_ref"]), ctx)
        return decrypt_json_fields(
            value,
            _lookup(op),
            ctx,
            topic_map=topic_map,
            on_erased=op.get("on_erased", "null"),
            expect_encrypted=op.get("rules"),
        )


def _schema_output(op: Operation, value: bytes, ctx: RecordContext) -> bytes:
    """Schema mode: the record's schema (``schema_plan["schema"]``) under ``schema_id``, the rule's selection."""
    plan = op["schema_plan"]  # a Protobuf plan holds compiled descriptors: the op carries the .proto text
    fields = _schema_fields(op["schema_id"], plan.get("type", "AVRO"), op.get("schema_text") or plan["schema"],
                            tuple(op["selection"]["tags"]), tuple(op["selection"]["paths"]))  # fmt: skip
    if op["op"] == "seal_schema":
        return fields.seal(value, bytes.fromhex(op["dek_hex"]), _key_ref(op["key_ref"]), ctx)
    return fields.open(value, _lookup(op), ctx)[0]


@functools.lru_cache(maxsize=16)
def _schema_fields(schema_id: int, kind: str, text: str, tags: tuple[str, ...], paths: tuple[str, ...]) -> SchemaFields:
    """One codec per schema and selection (a Protobuf schema is compiled with protoc once, not per operation)."""
    registry = SchemaRegistry("http://127.0.0.1:9/never-asked")  # every schema is preloaded
    registry.preload(schema_id, RegisteredSchema(kind, text))  # type: ignore[arg-type]
    return SchemaFields(registry, Selection(frozenset(tags), paths))


def run_python(op: Operation) -> Outcome:
    try:
        return {"ok": True, "output_hex": _python_output(op).hex()}
    except (StrongroomError, UnknownKey) as exc:
        return {"ok": False, "kind": type(exc).__name__}


def java_classpath() -> str:
    return runtime_classpath()


def run_java(ops: Sequence[Operation], *, messages: bool = False, shared: bool = False) -> list[Outcome]:
    """Run ``ops`` through the jar's CodecTool in one JVM; one outcome per operation, in order (``messages``: a
    refusal keeps the JVM's ``message``, its problem and hint, for tests that compare wording; ``shared``: all of
    them through one codec, as a task's records, its kept ciphers carried from one operation to the next and an
    operation's ``"forget_keys": true`` calling ``forgetKeys`` first)."""
    java = shutil.which("java")
    assert java, "java is not on PATH"
    lines = "".join(json.dumps(op) + "\n" for op in ops)
    done = subprocess.run(
        [java, "-cp", java_classpath(), "io.strongroom.dataplane.tools.CodecTool", "ops", *(["shared"] * shared)],
        input=lines.encode(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    # The JVM's messages are for people; the comparison is on the outcome (kind or output bytes).
    outcomes = [
        {k: v for k, v in json.loads(line).items() if messages or k != "message"}
        for line in done.stdout.decode().split("\n")[:-1]  # not splitlines: a message may hold U+2028 or U+0085
    ]
    assert len(outcomes) == len(ops), done.stderr.decode(errors="replace")[-4000:]
    return outcomes


def check_vectors(directory: Path) -> subprocess.CompletedProcess[str]:
    java = shutil.which("java")
    assert java, "java is not on PATH"
    return subprocess.run(
        [java, "-cp", java_classpath(), "io.strongroom.dataplane.tools.CodecTool", "vectors", str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


_BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def respelt(sealed: str) -> str:
    """The ``sr1:`` string ``sealed`` spelt otherwise for the same envelope bytes, as no engine writes it: unused
    bits set when its base64 ends in padding, else one excess ``=`` (which Python's strict base64 alone accepts)."""
    data = sealed[len("sr1:") :]
    if not data.endswith("="):
        return sealed + "="
    last = data.rstrip("=")
    changed = last[:-1] + _BASE64[_BASE64.index(last[-1]) | 1]
    assert changed != last, "the last character's unused bits were zero"
    return "sr1:" + changed + data[len(last) :]


def kind_of(outcome: Outcome) -> str:
    return "ok" if outcome["ok"] else str(outcome["kind"])


def pairs(ops: Sequence[Operation]) -> Iterator[tuple[Operation, Outcome, Outcome]]:
    """Each operation with its Python and its JVM outcome."""
    for op, java_outcome in zip(ops, run_java(ops), strict=True):
        yield op, run_python(op), java_outcome


# ------------------------------------------------------------------ schema mode
def random_text(rng: random.Random, chars: Sequence[str], most: int = 12) -> str:
    """Random text of ``chars``; never starting with ``sr1:`` (that is refused as a sealed-looking value, tested
    apart)."""
    text = "sr1:"
    while text.startswith("sr1:"):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, most)))
    return text


def driver_plans(kind: str, text: str, schema_id: int) -> SchemaPlans:
    """The driver's own plans for one schema preloaded under ``schema_id``, a schema-mode rule on ``source``."""
    rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "source", "mode": "schema"}]})
    plans = SchemaPlans(rules, RegistrySettings(url="http://127.0.0.1:9/never-asked"))
    assert plans.registry is not None
    plans.registry.preload(schema_id, RegisteredSchema(kind, text))  # type: ignore[arg-type]
    return plans


def driver_plan(kind: str, text: str, schema_id: int) -> dict[str, Any]:
    """The driver's answer to ``schema_plan`` for the schema, made by the driver's own code."""
    return driver_plans(kind, text, schema_id).answer({"topic": "source", "schema_id": schema_id})


def schema_sealing(rng: random.Random, value: bytes, schema_id: int, plan: dict[str, Any], **extra: Any) -> Operation:
    """Sealing ``value`` in schema mode under a random key, topic and subject, the PII tags selected."""
    return {
        "op": "seal_schema",
        "input_hex": value.hex(),
        "dek_hex": rng.randbytes(32).hex(),
        "key_ref": {"kind": "subject_key", "key_id_hex": rng.randbytes(16).hex()},
        "topic": rng.choice(["orders.enc", "événements"]),
        "subject_hex": rng.randbytes(rng.randint(1, 20)).hex(),
        "schema_id": schema_id,
        "selection": {"tags": ["PII"], "paths": []},
        "schema_plan": plan,
        **extra,
    }


def schema_opening(sealing: Operation, output_hex: str, *, erased: bool = False) -> Operation:
    """Opening what ``sealing`` made (``output_hex``) with its key, or with the key erased."""
    opening = {k: v for k, v in sealing.items() if k != "nonces_hex"}
    dek = None if erased else sealing["dek_hex"]
    return opening | {
        "op": "open_schema",
        "input_hex": output_hex,
        "keys": [{"key_ref": sealing["key_ref"], "dek_hex": dek}],
    }


def assert_each_opens_the_other(originals: Sequence[bytes], sealings: Sequence[Operation]) -> list[Outcome]:
    """Both engines seal each original, each engine opens both sealed copies, and every opening gives the
    original back alike on both; returns the JVM's sealing outcomes."""
    by_java = run_java(sealings)
    by_python = [run_python(op) for op in sealings]
    openings = []
    for sealing, java, python in zip(sealings, by_java, by_python, strict=True):
        assert java["ok"], java
        assert python["ok"], python
        openings += [schema_opening(sealing, java["output_hex"]), schema_opening(sealing, python["output_hex"])]
    results = list(pairs(openings))
    for (_, py, jvm), original in zip(results, [v for v in originals for _ in range(2)], strict=True):
        assert py == jvm
        assert bytes.fromhex(jvm["output_hex"]) == original, "opened to the record as it was produced"
    return by_java


def python_problem(op: Operation) -> str:
    """The problem the Python codec refuses ``op`` with (its own words, for tests that compare wording)."""
    try:
        _python_output(op)
    except Exception as exc:  # noqa: BLE001 - the refusal's own words are compared
        return str(getattr(exc, "problem", exc))
    raise AssertionError("python accepted a hostile record")
