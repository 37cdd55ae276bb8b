"""Client-library throughput beside plain confluent-kafka and the real Kroxylicious proxy, in one run.

Usage: .venv/bin/python bench/client_bench.py [--records N] [--subjects S] [--many-subjects M] [--rounds R]
       [--many-records K]

Started here: one Kafka broker, OpenBao (dev, Transit) and the real Kroxylicious 0.12 proxy in front of
the broker with record encryption and its Vault KMS on OpenBao (the launcher the recovery tests use,
:mod:`strongroom.testing.kroxylicious`). ~1 KB JSON values over S subjects (the record key). Every
side uses the same resilient librdkafka settings (``ClientConfig.producer()/.consumer()``: acks=all,
idempotence, lz4, read_committed). Sides, per round and in a rotating order:

* ``plain``: confluent-kafka ``Producer.produce`` per record + flush; ``Consumer.consume(500)`` batches.
* ``kroxylicious``: the same plain clients, connected through the proxy (it encrypts on produce and
  decrypts on fetch; one KEK per topic in OpenBao Transit).
* ``value``: ``EncryptingProducer.produce_batch`` (1,000 ``ProducerRecord`` per call) and
  ``DecryptingConsumer.consume(500)``, whole value.
* ``fields``: the same, 3 JSON fields (``strongroom.demo.data.PII_PATHS``).
* ``value-many``: the ``value`` side over M subjects, K records (default M: every subject once per
  round), with its own producer and key table (as a process of its own).

Keys exist before the timed rounds (steady state; creating them is timed once). Each side writes to one
topic across rounds and each round reads back exactly the records it wrote. One untimed warm-up round
(all sides), then R timed rounds; medians. Every round is verified after its timing stops: the count,
a checksum of every consumed value against the expected plaintext, and (once per side) that the bytes
on the broker are not the plaintext. Last lines::

    RESULT client ratio=<value produce / plain produce> ...
    RESULT client-consume ratio=<value consume / plain consume> ...
    RESULT client-vs-kroxylicious ratio=<value produce / Kroxylicious produce> consume_ratio=<...> ...
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from strongroom.clients.consumer import DecryptingConsumer
from strongroom.clients.producer import EncryptingProducer, ProducerRecord
from strongroom.demo.data import PII_PATHS, customer_events
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.keys.manager import KeyManager
from strongroom.keys.table import KeyTable
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.rules import EncryptionRules
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.kroxylicious import KroxyliciousProxy, java21
from strongroom.testing.openbao import OpenBaoServer

PARTITIONS = 2
BATCH = 1000
FETCH = 500
#: The producers keep keys for the whole run (the default 30 s TTL would expire between a side's rounds).
KEY_TTL_S = 3600.0
Records = list[tuple[bytes, bytes]]


def make_records(n: int, subjects: int) -> Records:
    """~1 KB JSON customer events keyed by customer id (the subject)."""
    base = list(customer_events(min(n, 5000), min(subjects, 5000)))
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


def checksum(values: list[bytes]) -> int:
    return sum(map(zlib.crc32, values))


def compact(value: bytes) -> bytes:
    """What a field-mode round trip gives back: the document re-serialised compactly."""
    return json.dumps(json.loads(value), separators=(",", ":"), ensure_ascii=False).encode()


# ------------------------------------------------------------------------------------------ the sides
def produce_plain(conf: dict[str, Any], topic: str, records: Records) -> None:
    producer = build_producer(conf)
    for key, value in records:
        produce_when_room(producer, topic, value=value, key=key)
    assert producer.flush(120) == 0


def consume_plain(conf: dict[str, Any], topic: str, starts: dict[int, int], n: int) -> list[bytes]:
    consumer = build_consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:8]}"})
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    values: list[bytes] = []
    while len(values) < n:
        batch = consumer.consume(min(FETCH, n - len(values)), 10)
        assert batch, f"plain consumer stalled at {len(values)}/{n}"
        for msg in batch:
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    consumer.close()
    return values


def produce_encrypted(producer: EncryptingProducer, topic: str, records: Records) -> None:
    for start in range(0, len(records), BATCH):
        producer.produce_batch([ProducerRecord(topic, v, key=k) for k, v in records[start : start + BATCH]])
    assert producer.flush(120) == 0


def consume_decrypting(
    client: ClientConfig, rules: EncryptionRules, table: KeyTable, topic: str, starts: dict[int, int], n: int
) -> list[bytes]:
    consumer = DecryptingConsumer(client, rules, table, group_id=f"bench-{uuid.uuid4().hex[:8]}")
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    values: list[bytes] = []
    while len(values) < n:
        batch = consumer.consume(min(FETCH, n - len(values)), 10)
        assert batch, f"decrypting consumer stalled at {len(values)}/{n}: {consumer.metrics()}"
        values.extend(msg.value for msg in batch)  # type: ignore[misc]
    assert consumer.metrics()["decrypted"] == n
    consumer.close()
    return values


@dataclass
class Side:
    """One way of writing and reading the records, with its topic and its timings."""

    name: str
    produce: Callable[[str, Records], None]
    consume: Callable[[str, dict[int, int], int], list[bytes]]
    records: Records
    expected: int  # checksum of the values a consumer must get back
    write_topic: str
    read_topic: str
    times: dict[str, list[float]] = field(default_factory=lambda: {"produce": [], "consume": []})
    at_rest_checked: bool = False
    raw_consume: Callable[[str, dict[int, int], int], list[bytes]] = lambda t, s, k: []


def run_side(side: Side, cluster: KafkaCluster, timed: bool) -> None:
    starts = {p: high for p, (_, high) in cluster_watermarks(cluster, side.read_topic).items()}
    n = len(side.records)
    t0 = time.perf_counter()
    side.produce(side.write_topic, side.records)
    t1 = time.perf_counter()
    values = side.consume(side.read_topic, starts, n)
    t2 = time.perf_counter()
    assert len(values) == n, f"{side.name}: read {len(values)} of {n}"
    assert checksum(values) == side.expected, f"{side.name}: the values read back are not the plaintext written"
    if not side.at_rest_checked:
        raw = read_raw(cluster, side.read_topic, starts)
        assert raw not in {v for _, v in side.records[:BATCH]}, f"{side.name}: the broker holds plaintext"
        side.at_rest_checked = True
    raw_s = None
    if side.name == "value":  # the same ciphertext read by the plain consumer: the bytes' share of the cost
        t3 = time.perf_counter()
        raw_values = side.raw_consume(side.read_topic, starts, n)
        raw_s = time.perf_counter() - t3
        assert len(raw_values) == n, f"raw read {len(raw_values)} of {n}"
        assert all(v[0] == 0xF5 for v in raw_values), "the raw read is not the envelopes"
    if timed:
        side.times["produce"].append(t1 - t0)
        side.times["consume"].append(t2 - t1)
        if raw_s is not None:
            side.times["consume ciphertext plainly"] = [*side.times.get("consume ciphertext plainly", []), raw_s]
        print(f"  {side.name:13} produce {n / (t1 - t0):9,.0f}/s   consume {n / (t2 - t1):9,.0f}/s", flush=True)


def cluster_watermarks(cluster: KafkaCluster, topic: str) -> dict[int, tuple[int, int]]:
    consumer = build_consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "bench-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def read_raw(cluster: KafkaCluster, topic: str, starts: dict[int, int]) -> bytes:
    """The first record a round wrote, as the broker stores it."""
    consumer = build_consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "bench-raw"})
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"nothing to read in {topic}"
            if msg.error() is None:
                return msg.value() or b""
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------------ the stack
@contextmanager
def kroxylicious(cluster: KafkaCluster, bao: OpenBaoServer, workdir: Path) -> Iterator[KroxyliciousProxy]:
    java = java21()
    if java is None:
        raise SystemExit("the Kroxylicious proxy needs Java 21+ (set STRONGROOM_JAVA21)")
    proxy = KroxyliciousProxy(java, workdir, cluster.bootstrap_servers, cluster.broker_ids, bao, "KEK-$(topicName)")
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def create_keys(manager: KeyManager, subjects: list[str]) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(subjects), BATCH):
        manager.get_or_create(subjects[i : i + BATCH])
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--subjects", type=int, default=2_000)
    parser.add_argument("--many-subjects", type=int, default=100_000)
    parser.add_argument("--many-records", type=int, default=0, help="records of value-many (default: one per subject)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.records
    records = make_records(n, args.subjects)
    many = make_records(args.many_records or args.many_subjects, args.many_subjects)
    mb = sum(len(v) for _, v in records) / 1e6
    print(f"{n} records, {mb / n * 1e6:.0f} bytes/value avg, {args.subjects} subjects "
          f"({args.many_subjects} for value-many), {args.rounds} rounds", flush=True)  # fmt: skip

    with KafkaCluster() as cluster, OpenBaoServer() as bao, tempfile.TemporaryDirectory() as tmp:
        client = ClientConfig(cluster.bootstrap_servers)
        kms = LocalKms.from_config({"path": str(Path(tmp) / "kms.json"), "create": True})
        LocalKekAdmin(kms).create_kek("strongroom-subjects")
        create_keys_topic(client, "bench-keys", partitions=3)
        manager = KeyManager(client, kms, topic="bench-keys")
        subjects = sorted({k.decode() for k, _ in records} | {k.decode() for k, _ in many})
        t_keys = create_keys(manager, subjects)
        print(f"key creation: {len(subjects)} subjects in {t_keys:.2f} s ({len(subjects) / t_keys:,.0f} keys/s)")
        # one key table per process in real life: the 2k-subject and the many-subject readers get their own
        table = KeyTable(client, kms, topic="bench-keys").open()
        table_many = KeyTable(client, kms, topic="bench-keys").open()
        table.wait_caught_up(120)
        table_many.wait_caught_up(120)
        (Path(tmp) / "krox").mkdir()
        with kroxylicious(cluster, bao, Path(tmp) / "krox") as proxy:
            sides = build_sides(cluster, bao, proxy, client, manager, (table, table_many), records, many)
            for side in sides:  # untimed warm-up: connections, JVM, caches, keys
                run_side(side, cluster, timed=False)
            for r in range(args.rounds):
                print(f"round {r + 1}", flush=True)
                order = sides[r % len(sides) :] + sides[: r % len(sides)]
                for side in order:
                    run_side(side, cluster, timed=True)
        table.close()
        table_many.close()
        manager.close()
    report(sides, n, mb, args.subjects, args.many_subjects, len(subjects) / t_keys)


def build_sides(
    cluster: KafkaCluster, bao: OpenBaoServer, proxy: KroxyliciousProxy, client: ClientConfig,
    manager: KeyManager, tables: tuple[KeyTable, KeyTable], records: Records, many: Records,
) -> list[Side]:  # fmt: skip
    plain_values = checksum([v for _, v in records])
    sides = [
        Side("plain", lambda t, rs: produce_plain(client.producer(), t, rs),
             lambda t, s, k: consume_plain(client.consumer("x"), t, s, k), records, plain_values, "", "",
             at_rest_checked=True),
    ]  # fmt: skip
    proxied = ClientConfig(proxy.bootstrap_servers)
    sides.append(
        Side("kroxylicious", lambda t, rs: produce_plain(proxied.producer(), t, rs),
             lambda t, s, k: consume_plain(proxied.consumer("x"), t, s, k), records, plain_values, "", "")
    )  # fmt: skip
    value_rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "bench-.*", "pattern": True}]})
    field_rules = EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": "bench-.*", "pattern": True, "mode": "fields", "fields": PII_PATHS}]}
    )
    for name, rules, recs, expected, table in (
        ("value", value_rules, records, plain_values, tables[0]),
        ("fields", field_rules, records, checksum([compact(v) for _, v in records]), tables[0]),
        ("value-many", value_rules, many, checksum([v for _, v in many]), tables[1]),
    ):
        producer = EncryptingProducer(client, rules, manager, key_cache_ttl_s=KEY_TTL_S)
        sides.append(
            Side(name, lambda t, rs, p=producer: produce_encrypted(p, t, rs),  # type: ignore[misc]
                 lambda t, s, k, rl=rules, tb=table: consume_decrypting(client, rl, tb, t, s, k),  # type: ignore[misc]
                 recs, expected, "", "")
        )  # fmt: skip
    sides[2].raw_consume = lambda t, s, k: consume_plain(client.consumer("x"), t, s, k)
    for side in sides:
        topic = f"bench-{side.name}-{uuid.uuid4().hex[:6]}"
        encrypted = side.name not in ("plain", "kroxylicious")
        side.write_topic, side.read_topic = topic, f"{topic}.enc" if encrypted else topic
        cluster.create_topic(side.read_topic, PARTITIONS, 1)
        if side.name == "kroxylicious":
            bao.client().secrets.transit.create_key(name=f"KEK-{topic}", key_type="aes256-gcm96")
    return sides


def report(sides: list[Side], n: int, mb: float, subjects: int, many_subjects: int, keys_per_s: float) -> None:
    rps = {
        (side.name, what): len(side.records) / statistics.median(times)
        for side in sides
        for what, times in side.times.items()
    }
    print("medians of rounds:")
    for (name, what), value in rps.items():
        print(f"  {what:8} {name:13} {value:10,.0f} records/s  {value * mb / n:7.1f} MB/s")
    plain_p, plain_c = rps["plain", "produce"], rps["plain", "consume"]
    value_p, value_c = rps["value", "produce"], rps["value", "consume"]
    krox_p, krox_c = rps["kroxylicious", "produce"], rps["kroxylicious", "consume"]
    fields_p, fields_c = rps["fields", "produce"], rps["fields", "consume"]
    many_p, many_c = rps["value-many", "produce"], rps["value-many", "consume"]
    print(
        f"RESULT client ratio={value_p / plain_p:.3f} fields_ratio={fields_p / plain_p:.3f} "
        f"many_subjects_ratio={many_p / value_p:.3f} produce_rps={value_p:.0f} plain_produce_rps={plain_p:.0f} "
        f"fields_produce_rps={fields_p:.0f} many_produce_rps={many_p:.0f} subjects={subjects} "
        f"many_subjects={many_subjects} records={n} key_creation_kps={keys_per_s:.0f}"
    )
    print(
        f"RESULT client-consume ratio={value_c / plain_c:.3f} fields_ratio={fields_c / plain_c:.3f} "
        f"many_subjects_ratio={many_c / value_c:.3f} consume_rps={value_c:.0f} plain_consume_rps={plain_c:.0f} "
        f"fields_consume_rps={fields_c:.0f} many_consume_rps={many_c:.0f} "
        f"ciphertext_plain_consume_rps={rps['value', 'consume ciphertext plainly']:.0f}"
    )
    print(
        f"RESULT client-vs-kroxylicious ratio={value_p / krox_p:.3f} consume_ratio={value_c / krox_c:.3f} "
        f"kroxylicious_produce_rps={krox_p:.0f} kroxylicious_consume_rps={krox_c:.0f} "
        f"kroxylicious_vs_plain={krox_p / plain_p:.3f} kroxylicious_consume_vs_plain={krox_c / plain_c:.3f}"
    )


if __name__ == "__main__":
    main()
