"""Per-record CPU of the client library's sealing and opening steps, per-record path vs batch path, no broker.

Usage: .venv/bin/python bench/client_budget.py [--records N] [--subjects S] [--rounds R]

Where a record's time goes between the Kafka calls: the per-record path (``seal_record`` with the
rule's codec; ``RuleCodec.open`` plus the ``DecryptedMessage`` constructor) against the batch paths
(``SubjectSealers.seal``; ``open_simple`` over real confluent-kafka ``Message`` objects), whole value
and 3 JSON fields, and the AES-GCM call alone. Keys come from memory (the key table's lookup is not
timed here: the client benchmark covers it). Interleaved rounds after an untimed warm-up; medians;
every round's output is checked (it opens, to the input). Last line:
``RESULT client-budget ratio=<per-record path µs / batch path µs, whole-value produce> ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Message

from strongroom.clients.batch_open import KeyCiphers, open_simple, open_target
from strongroom.clients.batch_seal import SealItem, SubjectSealers
from strongroom.clients.records import DecryptedMessage, MessageStatus
from strongroom.clients.sealing import Opened, RuleCodec, Sealed, seal_record
from strongroom.crypto.aead import CIPHERS
from strongroom.demo.data import PII_PATHS, customer_events
from strongroom.envelope import AadProfile, SubjectKeyRef
from strongroom.envelope.json_fields import native_members
from strongroom.keys.table import SubjectKey
from strongroom.rules import TopicRule

TOPIC = "bench.enc"


class MemoryKeys:
    """The key table's lookup contract, from memory."""

    def __init__(self, keys: dict[bytes, bytes]) -> None:
        self.keys = keys

    def lookup(self, ref: SubjectKeyRef, subject: str) -> bytes | None:
        return self.keys.get(ref.key_id)

    def warm(self, key_ids: Any) -> int:
        return 0

    def add_erasure_listener(self, listener: Any) -> None:
        return None


def records(n: int, subjects: int) -> list[tuple[SubjectKey, bytes]]:
    keys = [SubjectKey(f"c-{i:06d}", os.urandom(16), os.urandom(32)) for i in range(subjects)]
    base = [value for _, value in customer_events(min(n, 2000), min(subjects, 2000))]
    return [(keys[i % subjects], base[i % len(base)]) for i in range(n)]


def as_messages(codec: RuleCodec, recs: list[tuple[SubjectKey, bytes]]) -> list[Message]:
    return [
        Message(topic=TOPIC, partition=0, offset=i, key=k.subject.encode(), timestamp=(1, i),
                value=codec.seal_value(v, TOPIC, k.subject, k.key_id, k.key), headers=codec.sealed_headers([]))
        for i, (k, v) in enumerate(recs)
    ]  # fmt: skip


def steps(recs: list[tuple[SubjectKey, bytes]]) -> dict[str, Callable[[], int]]:
    value_codec = RuleCodec(TopicRule(topic="bench"))
    fields_codec = RuleCodec(TopicRule.model_validate({"topic": "bench", "mode": "fields", "fields": PII_PATHS}))
    keys = {k.subject: k for k, _ in recs}
    items = [SealItem(TOPIC, AadProfile.TOPIC, k.subject, k.subject.encode(), v) for k, v in recs]
    sealers = SubjectSealers()
    table = MemoryKeys({k.key_id: k.key for k, _ in recs})
    ciphers = KeyCiphers(table)
    value_msgs = as_messages(value_codec, recs)
    fields_msgs = as_messages(fields_codec, recs)
    nonce, aad = os.urandom(12), os.urandom(80)

    def seal_per_record(codec: RuleCodec) -> int:
        for k, v in recs:
            sealed = seal_record(codec, v, [], TOPIC, k.subject, (k.key_id, k.key), 1 << 20)
            assert isinstance(sealed, Sealed)
        return len(recs)

    def seal_batch() -> int:
        return len(sealers.seal(items, keys, sealers.notices()))

    members = [native_members(fields_codec.fields)] * len(items) if fields_codec.fields else []

    def seal_fields_batch() -> int:
        """The producer's field-mode batch path (``EncryptingProducer._seal_fields``): natively where it can, the
        codec for the rest; the first round's output is opened and compared with the input."""
        sealed = sealers.seal_fields(items, members, keys, sealers.notices())
        for i, (k, v) in enumerate(recs):
            if sealed[i] is None:
                sealed[i] = fields_codec.seal_value(v, TOPIC, k.subject, k.key_id, k.key)
        if not checked:
            checked.append(True)
            lookup = table.lookup
            for (k, v), out in zip(recs, sealed, strict=True):
                outcome = fields_codec.open(k.subject.encode(), out, fields_codec.sealed_headers([]), TOPIC, lookup)
                assert isinstance(outcome, Opened), outcome
                assert json.loads(outcome.value) == json.loads(v)
        return len(sealed)

    checked: list[bool] = []

    def open_per_record(codec: RuleCodec, msgs: list[Message]) -> int:
        lookup = table.lookup
        out = []
        for msg in msgs:
            outcome = codec.open(msg.key(), msg.value(), msg.headers(), TOPIC, lookup)
            assert isinstance(outcome, Opened)
            ts_type, ts = msg.timestamp()
            out.append(DecryptedMessage(msg.topic(), msg.partition(), msg.offset(), msg.key(), outcome.value,
                                        outcome.headers, ts, ts_type, msg.leader_epoch(), MessageStatus.DECRYPTED,
                                        outcome.subject, outcome.erased_fields))  # fmt: skip
        return len(out)

    targets = {id(c): open_target(c.marker, TOPIC, c if c.fields is not None else None)
               for c in (value_codec, fields_codec)}  # fmt: skip  # one per topic, as the consumer keeps them

    def open_batch(codec: RuleCodec, msgs: list[Message]) -> int:
        target = targets[id(codec)]
        out: list[DecryptedMessage] = []
        assert open_simple(msgs, lambda _: target, ciphers, out, {}) == len(msgs)
        return len(out)

    def aes_only() -> int:
        for k, v in recs:
            CIPHERS.get(k.key).encrypt(nonce, v, aad)
        return len(recs)

    return {
        "seal value, per-record path": lambda: seal_per_record(value_codec),
        "seal value, batch path": seal_batch,
        "seal fields, per-record path": lambda: seal_per_record(fields_codec),
        "seal fields, batch path": seal_fields_batch,
        "open value, per-record path": lambda: open_per_record(value_codec, value_msgs),
        "open value, batch path": lambda: open_batch(value_codec, value_msgs),
        "open fields, per-record path": lambda: open_per_record(fields_codec, fields_msgs),
        "open fields, batch path": lambda: open_batch(fields_codec, fields_msgs),
        "AES-GCM encrypt alone (1 KB)": aes_only,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--subjects", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    recs = records(args.records, args.subjects)
    measured = steps(recs)
    for step in measured.values():  # untimed warm-up (caches, ciphers)
        assert step() == len(recs)
    times: dict[str, list[float]] = {name: [] for name in measured}
    for _ in range(args.rounds):
        for name, step in measured.items():
            t0 = time.perf_counter()
            done = step()
            times[name].append((time.perf_counter() - t0) / done * 1e6)
            assert done == len(recs)
    us = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.records} records (~1 KB JSON), {args.subjects} subjects, {args.rounds} rounds; µs per record:")
    for name, value in us.items():
        print(f"  {name:32} {value:7.2f}")
    print(
        f"RESULT client-budget ratio={us['seal value, per-record path'] / us['seal value, batch path']:.2f} "
        f"open_ratio={us['open value, per-record path'] / us['open value, batch path']:.2f} "
        f"fields_ratio={us['seal fields, per-record path'] / us['seal fields, batch path']:.2f} "
        f"fields_open_ratio={us['open fields, per-record path'] / us['open fields, batch path']:.2f} "
        f"seal_value_us={us['seal value, batch path']:.2f} open_value_us={us['open value, batch path']:.2f} "
        f"aes_us={us['AES-GCM encrypt alone (1 KB)']:.2f}"
    )


if __name__ == "__main__":
    main()
