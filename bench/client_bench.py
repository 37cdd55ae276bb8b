"""Client-library throughput: EncryptingProducer / DecryptingConsumer against plain confluent-kafka clients.

Usage: .venv/bin/python bench/client_bench.py [--records N] [--subjects S] [--rounds R]

One real 1-broker Kafka (started here), the local KMS, ~1 KB JSON values, S distinct subjects. Both
sides use the same resilient librdkafka settings (``ClientConfig.producer()/.consumer()``: acks=all,
idempotence, lz4). Per round and per side, N records are produced (produce + flush) and consumed
(poll until N, from the beginning, read_committed). The encrypted sides run with every subject's key
already created (steady state: subjects recur); creating the S keys is timed once, separately.
Rounds alternate plain and encrypted runs; the best round of each side is reported.

Last line: ``RESULT client ratio=<encrypted/plain produce, whole value> consume_ratio=... fields_...``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from strongroom.clients.consumer import DecryptingConsumer
from strongroom.clients.producer import EncryptingProducer, ProducerRecord
from strongroom.demo.data import PII_PATHS, customer_events
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.keys.manager import KeyManager
from strongroom.keys.table import KeyTable
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.rules import EncryptionRules
from strongroom.testing.kafka_cluster import KafkaCluster

PARTITIONS = 2
BATCH = 1000


def make_records(n: int, subjects: int) -> list[tuple[bytes, bytes]]:
    """~1 KB JSON customer events keyed by customer id (the subject)."""
    base = list(customer_events(min(n, 5000), subjects))
    out = []
    for i in range(n):
        _, value = base[i % len(base)]
        doc = json.loads(value)
        doc["customer_id"] = f"c-{i % subjects:06d}"
        doc["notes"] = ""
        raw = json.dumps(doc).encode()
        doc["notes"] = "n" * max(0, 1024 - len(raw))
        out.append((doc["customer_id"].encode(), json.dumps(doc).encode()))
    return out


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def produce_plain(client: ClientConfig, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer(client.producer())
    for key, value in records:
        produce_when_room(producer, topic, value=value, key=key)
    assert producer.flush(120) == 0


def produce_encrypted(producer: EncryptingProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    for start in range(0, len(records), BATCH):
        producer.produce_batch([ProducerRecord(topic, v, key=k) for k, v in records[start : start + BATCH]])
    assert producer.flush(120) == 0


def consume_plain(client: ClientConfig, topic: str, n: int) -> None:
    consumer = Consumer(client.consumer(f"bench-{uuid.uuid4().hex[:8]}"))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    while got < n:
        msg = consumer.poll(5)
        assert msg is not None, f"plain consumer stalled at {got}/{n}"
        if msg.error() is None:
            _ = msg.value()
            got += 1
    consumer.close()


def consume_decrypting(client: ClientConfig, rules: EncryptionRules, table: KeyTable, topic: str, n: int) -> None:
    consumer = DecryptingConsumer(client, rules, table, group_id=f"bench-{uuid.uuid4().hex[:8]}")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    while got < n:
        msg = consumer.poll(5)
        assert msg is not None, f"decrypting consumer stalled at {got}/{n}: {consumer.metrics()}"
        got += 1
    assert consumer.metrics()["decrypted"] == n
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--subjects", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    n = args.records
    records = make_records(n, args.subjects)
    mb = sum(len(v) for _, v in records) / 1e6
    print(f"{n} records, {mb / n * 1e6:.0f} bytes/value avg, {args.subjects} subjects, {args.rounds} rounds")

    with KafkaCluster() as cluster, tempfile.TemporaryDirectory() as tmp:
        client = ClientConfig(cluster.bootstrap_servers)
        kms = LocalKms.from_config({"path": str(Path(tmp) / "kms.json"), "create": True})
        LocalKekAdmin(kms).create_kek("strongroom-subjects")
        create_keys_topic(client, "bench-keys", partitions=3)
        manager = KeyManager(client, kms, topic="bench-keys")
        subjects = sorted({k.decode() for k, _ in records})
        t_keys = timed(lambda: [manager.get_or_create(subjects[i : i + BATCH]) for i in range(0, len(subjects), BATCH)])
        print(f"key creation: {len(subjects)} subjects in {t_keys:.2f} s ({len(subjects) / t_keys:,.0f} keys/s)")
        table = KeyTable(client, kms, topic="bench-keys").open()
        table.wait_caught_up(120)

        value_rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "bench-.*", "pattern": True}]})
        field_rules = EncryptionRules.parse_obj_or_fail(
            {"rules": [{"topic": "bench-.*", "pattern": True, "mode": "fields", "fields": PII_PATHS}]}
        )
        producers = {
            "value": EncryptingProducer(client, value_rules, manager),
            "fields": EncryptingProducer(client, field_rules, manager),
        }
        best: dict[str, float] = {}

        def record(name: str, seconds: float) -> None:
            best[name] = min(seconds, best.get(name, float("inf")))
            print(f"  {name:16} {n / seconds:10,.0f} records/s  {mb / seconds:7.1f} MB/s")

        for r in range(args.rounds):
            print(f"round {r + 1}")
            plain_topic = f"plain-{uuid.uuid4().hex[:8]}"
            cluster.create_topic(plain_topic, PARTITIONS, 1)
            record("produce plain", timed(lambda t=plain_topic: produce_plain(client, t, records)))
            record("consume plain", timed(lambda t=plain_topic: consume_plain(client, t, n)))
            for mode, rules in (("value", value_rules), ("fields", field_rules)):
                source = f"bench-{uuid.uuid4().hex[:8]}"
                cluster.create_topic(f"{source}.enc", PARTITIONS, 1)
                producer = producers[mode]
                record(f"produce {mode}", timed(lambda p=producer, s=source: produce_encrypted(p, s, records)))
                record(
                    f"consume {mode}",
                    timed(lambda rl=rules, s=source: consume_decrypting(client, rl, table, f"{s}.enc", n)),
                )
        for producer in producers.values():
            producer.close()
        table.close()
        manager.close()

    rps = {name: n / seconds for name, seconds in best.items()}
    print("best of rounds:")
    for name, value in rps.items():
        print(f"  {name:16} {value:10,.0f} records/s  {value * mb / n:7.1f} MB/s")
    ratio = rps["produce value"] / rps["produce plain"]
    consume_ratio = rps["consume value"] / rps["consume plain"]
    fields_produce = rps["produce fields"] / rps["produce plain"]
    fields_consume = rps["consume fields"] / rps["consume plain"]
    print(
        f"RESULT client ratio={ratio:.3f} consume_ratio={consume_ratio:.3f} fields_produce_ratio={fields_produce:.3f} "
        f"fields_consume_ratio={fields_consume:.3f} produce_rps={rps['produce value']:.0f} "
        f"plain_produce_rps={rps['produce plain']:.0f} consume_rps={rps['consume value']:.0f} "
        f"plain_consume_rps={rps['consume plain']:.0f} key_creation_kps={len(subjects) / t_keys:.0f}"
    )


if __name__ == "__main__":
    main()
