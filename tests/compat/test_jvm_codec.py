"""The JVM codec (``java/``, built into build/strongroom-dataplane.jar by ``make``) against the Python one.

* It opens every frozen vector and re-seals each with the vector's fixed nonces to identical bytes.
* Records sealed by Python (both modes, both key kinds, both profiles, random content) open on the JVM to
  the bytes Python's own reader produces, and JVM-sealed records open in Python.
* With the same fixed nonces both engines seal a random record to the same bytes (same AAD, same compact
  JSON text, same re-serialised document).
* Hostile input takes the same outcome kind on both engines.

Needs a JVM (one ``java`` process per batch, no Spark, no Kafka), hence ``integration``.
"""

from __future__ import annotations

import json
import math
import random
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from jvm_codec import Operation, check_vectors, key_ref_json, kind_of, pairs, run_java, run_python

from strongroom.envelope import KeyRef, SubjectKeyRef, WrappedDekRef

pytestmark = pytest.mark.integration

VECTORS = Path(__file__).parent / "vectors"
NAME_CHARS = ["a", "b", "z", "_", "-", "é", "名", "🎉", " ", ".", "[", "]", '"', "'", "$", "\\", "\u3000", "\x85", "\t"]
TEXT_CHARS = [*NAME_CHARS, "\x00", "\x1f", "\x7f", "\n", "\u2028", "sr1", ":", "/", "\ufeff"]


def test_the_jvm_opens_and_reseals_every_frozen_vector() -> None:
    done = check_vectors(VECTORS)
    lines = done.stdout.splitlines()
    expected = sorted(path.stem for path in VECTORS.glob("*.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines == [f"OK {name}" for name in expected]


def test_a_mismatching_vector_is_reported(tmp_path: Path) -> None:
    """The vector check can fail: one flipped ciphertext byte in a copy of a vector is a mismatch."""
    vector = json.loads((VECTORS / "whole-value-subject-key-topic.json").read_text(encoding="utf-8"))
    envelope = bytearray.fromhex(vector["envelope_hex"])
    envelope[-1] ^= 1
    vector["envelope_hex"] = envelope.hex()
    (tmp_path / "tampered.json").write_text(json.dumps(vector), encoding="utf-8")
    done = check_vectors(tmp_path)
    assert done.returncode == 1
    assert done.stdout.startswith("MISMATCH tampered: IntegrityError")


# --- random records ---------------------------------------------------------------------------------


def _text(rng: random.Random, chars: list[str], most: int) -> str:
    return "".join(rng.choice(chars) for _ in range(rng.randint(0, most)))


def _number(rng: random.Random) -> int | float:
    choice = rng.randrange(6)
    if choice == 0:
        return rng.randint(-(10**30), 10**30)
    if choice == 1:
        return rng.randint(-1000, 1000)
    if choice == 2:
        return rng.uniform(-1e6, 1e6)
    if choice == 3:
        return rng.choice([0.0, -0.0, 1e16, 1e15, 1e-4, 1e-5, 0.1, 2e-323, 1.7976931348623157e308, 123456789.0])
    digits = rng.randint(1, 17)  # a mantissa of up to 17 significant digits, always written without an exponent
    return float(f"0.{rng.randrange(10**digits):0{digits}d}e{rng.randint(-320, 300)}")


def _value(rng: random.Random, depth: int) -> Any:
    choice = rng.randrange(7 if depth < 3 else 5)
    if choice == 0:
        return _text(rng, TEXT_CHARS, 12)
    if choice == 1:
        return _number(rng)
    if choice == 2:
        return rng.choice([True, False, None])
    if choice in (3, 4):
        return _text(rng, TEXT_CHARS, 3) if rng.random() < 0.5 else _number(rng)
    if choice == 5:
        return {_text(rng, NAME_CHARS, 6) or "k": _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def _document(rng: random.Random) -> tuple[bytes, list[str]]:
    """A JSON object, spelt in one of several ways, and rules selecting some of its fields."""
    names = list(dict.fromkeys(_text(rng, NAME_CHARS, 6) or f"n{i}" for i in range(rng.randint(1, 6))))
    document: dict[str, Any] = {name: _value(rng, 1) for name in names}
    document["items"] = [{"email": _text(rng, TEXT_CHARS, 8), "n": _number(rng)} for _ in range(rng.randint(0, 3))]
    chosen = rng.sample(names, rng.randint(1, len(names)))
    rules = [f"$[{json.dumps(name, ensure_ascii=rng.random() < 0.5)}]" for name in chosen]
    if rng.random() < 0.5:
        rules.append("$.items[*].email")
    if rng.random() < 0.3:
        rules.append("$.absent.field")
    indent = rng.choice([None, 2])
    raw = json.dumps(document, ensure_ascii=rng.random() < 0.5, indent=indent, allow_nan=False)
    return raw.encode(), rules


def _key_ref(rng: random.Random) -> KeyRef:
    if rng.random() < 0.5:
        return SubjectKeyRef(rng.randbytes(16))
    kek_ref = "vault:" + _text(rng, ["k", "e", ":", "é", "-"], 10) + "kek"
    return WrappedDekRef(kek_ref, rng.randbytes(rng.randint(1, 300)))


def _record(rng: random.Random, mode: str) -> Operation:
    ref = _key_ref(rng)
    op: Operation = {
        "dek_hex": rng.randbytes(32).hex(),
        "key_ref": key_ref_json(ref),
        "topic": rng.choice(["orders", "événements", "t" * 300, ""]),
        "subject_hex": rng.randbytes(rng.randint(0, 40)).hex(),
        "profile": rng.choice(["topic", "portable"]),
    }
    if mode == "value":
        return op | {"input_hex": rng.randbytes(rng.choice([0, 1, 17, 1024, 5000])).hex()}
    raw, rules = _document(rng)
    return op | {"input_hex": raw.hex(), "rules": rules}


def _opening(sealed: Operation, output_hex: str, mode: str, *, with_rules: bool) -> Operation:
    opening = {k: v for k, v in sealed.items() if k not in ("nonces_hex", "rules")}
    opening |= {"op": f"open_{mode}", "input_hex": output_hex}
    opening["keys"] = [{"key_ref": sealed["key_ref"], "dek_hex": sealed["dek_hex"]}]
    if with_rules:
        opening["rules"] = sealed["rules"]
    return opening


@pytest.mark.parametrize("mode", ["value", "fields"])
def test_python_and_the_jvm_seal_the_same_bytes_with_the_same_nonces(mode: str) -> None:
    rng = random.Random(f"same-bytes-{mode}")
    ops = []
    for _ in range(300):
        op = _record(rng, mode) | {"op": f"seal_{mode}", "nonces_hex": [rng.randbytes(12).hex() for _ in range(40)]}
        ops.append(op)
    mismatches = [(op, py, jvm) for op, py, jvm in pairs(ops) if py != jvm]
    assert not mismatches, mismatches[:3]
    assert sum(kind_of(run_python(op)) == "ok" for op in ops) > 250  # the records are mostly sealable


@pytest.mark.parametrize("mode", ["value", "fields"])
def test_python_seals_and_the_jvm_opens(mode: str) -> None:
    rng = random.Random(f"python-to-jvm-{mode}")
    openings = []
    for _ in range(300):
        sealing = _record(rng, mode) | {"op": f"seal_{mode}"}
        sealed = run_python(sealing)
        if sealed["ok"]:
            openings.append(_opening(sealing, sealed["output_hex"], mode, with_rules=False))
            if mode == "fields":
                openings.append(_opening(sealing, sealed["output_hex"], mode, with_rules=True))
    assert len(openings) > 250
    mismatches = [(op, py, jvm) for op, py, jvm in pairs(openings) if py != jvm or not jvm["ok"]]
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("mode", ["value", "fields"])
def test_the_jvm_seals_with_its_drbg_and_python_opens(mode: str) -> None:
    rng = random.Random(f"jvm-to-python-{mode}")
    sealings = [_record(rng, mode) | {"op": f"seal_{mode}"} for _ in range(300)]
    results = run_java(sealings)
    openings = []
    for sealing, sealed in zip(sealings, results, strict=True):
        assert kind_of(sealed) == kind_of(run_python(sealing)), sealing
        if sealed["ok"]:
            opening = _opening(sealing, sealed["output_hex"], mode, with_rules=mode == "fields")
            opened = run_python(opening)
            expected = run_python(_opening(sealing, run_python(sealing)["output_hex"], mode, with_rules=False))
            assert opened == expected, opening
            openings.append(opening)
    assert len(openings) > 250
    envelopes = [bytes.fromhex(r["output_hex"]) for r in results if r["ok"]]
    assert len(set(envelopes)) == len(envelopes)  # fresh nonces: no two sealings alike


@pytest.mark.parametrize("mode", ["value", "fields"])
def test_one_codec_keeps_a_cipher_per_key_and_seals_and_opens_as_python_does(mode: str) -> None:
    """A task's codec keeps a cipher per key it meets again (``EnvelopeCodec.KEPT_CIPHERS``, 256). Through one
    codec, records of 400 keys, as a task meets them (met once, met again, more keys met again than it keeps, 20 hot
    keys), with the codec told to forget its keys now and then as after a chunk: every sealing is the bytes Python
    seals with the same nonces, every opening is Python's, and a kept cipher never serves another key: a record
    opened with another kept key's DEK under its own key reference fails on both engines."""
    rng = random.Random(f"kept-ciphers-{mode}")
    pool = [(key_ref_json(_key_ref(rng)), rng.randbytes(32).hex()) for _ in range(400)]
    # 300 keys twice (each met again: more than the 256 kept, so kept ciphers are re-keyed), then hot and cold keys
    picks = [*range(300), *range(300)] + [rng.randrange(20) if rng.random() < 0.6 else rng.randrange(400)
                                         for _ in range(900)]  # fmt: skip
    sealings = []
    for index, pick in enumerate(picks):
        ref, dek = pool[pick]
        sealing = _record(rng, mode) | {"key_ref": ref, "dek_hex": dek, "op": f"seal_{mode}"}
        sealing["nonces_hex"] = [rng.randbytes(12).hex() for _ in range(40)]
        sealings.append(sealing | {"forget_keys": index in (600, 1000, 1300)})
    sealed = run_java(sealings, shared=True)
    assert sealed == [run_python(op) for op in sealings]
    assert sum(outcome["ok"] for outcome in sealed) > 1300

    openings, foreign = [], []
    for index, (sealing, outcome) in enumerate(zip(sealings, sealed, strict=True)):
        if not outcome["ok"]:
            continue
        opening = _opening(sealing, outcome["output_hex"], mode, with_rules=False)
        if index % 7 == 0:  # another key's DEK, most likely kept (a hot key), under this record's key reference
            other = next(dek for _, dek in pool[:21] if dek != sealing["dek_hex"])
            opening["keys"] = [{"key_ref": sealing["key_ref"], "dek_hex": other}]
            foreign.append(len(openings))
        openings.append(opening | {"forget_keys": index % 500 == 499})
    opened = run_java(openings, shared=True)
    assert opened == [run_python(op) for op in openings]
    assert foreign
    assert {kind_of(opened[i]) for i in foreign} == {"IntegrityError"}
    assert all(outcome["ok"] for i, outcome in enumerate(opened) if i not in set(foreign))


def test_both_engines_write_every_double_alike() -> None:
    """200,000 doubles from random bit patterns (all magnitudes, subnormals) sealed as one field: same bytes."""
    rng = random.Random("doubles")
    ops = []
    for _ in range(200):
        doubles = []
        while len(doubles) < 1000:
            (value,) = struct.unpack(">d", rng.randbytes(8))
            if math.isfinite(value):
                doubles.append(value)
        raw = json.dumps({"x": doubles, "y": [repr(d) for d in doubles[:3]]}).encode()
        ops.append(
            {
                "op": "seal_fields",
                "input_hex": raw.hex(),
                "rules": ["$.x"],
                "dek_hex": bytes(32).hex(),
                "key_ref": {"kind": "subject_key", "key_id_hex": bytes(16).hex()},
                "topic": "t",
                "subject_hex": "",
                "profile": "topic",
                "nonces_hex": [bytes(12).hex()],
            }
        )
    mismatches = [op for op, py, jvm in pairs(ops) if py != jvm or not jvm["ok"]]
    assert not mismatches, len(mismatches)


# --- mutated records: both engines decide alike ------------------------------------------------------

#: Spellings a mutation splices into a document: escapes (lone and paired surrogates, NUL, a JSON-escaped
#: ``sr1:``), invalid UTF-8, numbers spelt otherwise, JSON punctuation, a byte order mark.
SPLICES = [
    b"\\ud800", b"\\udc00", b"\\u0000", b"\\u2028", b"\\/", b"\\u0073", b'\\"', b"\\ud83c\\udf89", b"\\uD800\\uDC00",
    b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xff", b"\x00", b"\x1f", b"\xef\xbb\xbf", b"\xe2\x80\xa8",
    b"-0", b"1E+2", b"0e0", b"1e400", b"-1e-400", b"9007199254740993", b"1.0", b"1" * 40, b"-", b".", b"e",
    b'"sr1:', b'"sr1:AAAA"', b"{}", b"[]", b"null", b",", b":", b'"', b"{", b"}", b"[", b"]", b" ", b"\r\n",
]  # fmt: skip
BASE64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
NUMBERS = [b"-0", b"0.0", b"1E2", b"1e+2", b"100.00", b"1e400", b"-1e-400", b"9" * 400, b"0e0", b"5e-324",
           b"1.0000000000000002"]  # fmt: skip


def _mutated(rng: random.Random, raw: bytes) -> bytes:
    """``raw`` with one to three small changes, most of them keeping it nearly JSON (so that the readers go deep)."""
    data = bytearray(raw)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        choice = rng.randrange(7)
        sealed = data.find(b'"sr1:', rng.randrange(len(data) + 1))
        numbers = list(re.finditer(rb"(?<=[:\[,])-?[0-9][0-9.eE+-]*", data))
        if choice == 0:
            data[at:at] = rng.choice(SPLICES)
        elif choice == 1:
            del data[at : at + rng.randint(1, 4)]
        elif choice == 2 and at < len(data):
            data[at] = rng.randrange(256)
        elif choice == 3 and sealed >= 0:  # inside a sealed string's base64: substitute, insert or drop one character
            end = data.find(b'"', sealed + 1)
            where = rng.randrange(sealed + 5, max(sealed + 6, end))
            data[where : where + rng.randrange(2)] = bytes([rng.choice(BASE64_CHARS)]) * rng.randrange(2)
        elif choice == 4 and numbers:
            number = rng.choice(numbers)
            data[number.start() : number.end()] = rng.choice(NUMBERS)
        elif choice == 5 and (first := data.find(b'"')) >= 0 and (comma := data.find(b",", first)) > first:
            data[-1:-1] = b"," + data[first:comma]  # the first member again, at the end
        elif (quote := data.find(b'"', at)) >= 0:
            data[quote + 1 : quote + 1] = rng.choice(SPLICES[:9])  # an escape just inside a string
    return bytes(data)


def test_mutated_documents_take_the_same_outcome_on_both_engines() -> None:
    """Random field-mode records and their sealed forms, each changed slightly (escapes, surrogates, invalid
    UTF-8, numbers spelt otherwise, a member twice, a sealed string's base64 altered), sealed or opened by both
    engines: the same output or the same refusal. (This found the two engines reading an ``sr1:`` string with
    excess padding differently, which the fixed hostile table had missed.)"""
    rng = random.Random("mutated-documents")
    ops: list[Operation] = []
    while len(ops) < 4000:
        nonces = [rng.randbytes(12).hex() for _ in range(40)]
        sealing = _record(rng, "fields") | {"op": "seal_fields", "nonces_hex": nonces}
        if rng.random() < 0.45:
            ops.append(sealing | {"input_hex": _mutated(rng, bytes.fromhex(sealing["input_hex"])).hex()})
            continue
        sealed = run_python(sealing)
        if sealed["ok"]:
            opening = _opening(sealing, sealed["output_hex"], "fields", with_rules=rng.random() < 0.5)
            ops.append(opening | {"input_hex": _mutated(rng, bytes.fromhex(sealed["output_hex"])).hex()})
    outcomes = list(pairs(ops))
    mismatches = [(op, py, jvm) for op, py, jvm in outcomes if py != jvm]
    assert not mismatches, mismatches[:3]
    kinds = {(op["op"], kind_of(py)) for op, py, _ in outcomes}
    # the mutations reach past the JSON reader: successes and refusals of the envelope itself, both ways
    for expected in [("seal_fields", "ok"), ("seal_fields", "NotJson"), ("open_fields", "ok"),
                     ("open_fields", "MalformedEnvelope"), ("open_fields", "IntegrityError")]:  # fmt: skip
        assert expected in kinds, sorted(kinds)
