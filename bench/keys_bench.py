"""Keys and erasure: key creation throughput, KMS calls, key-table memory, erasure propagation.

Usage: .venv/bin/python bench/keys_bench.py [--subjects 1000000] [--batch 50000] [--baseline 2000]

On one local Kafka broker and an OpenBao dev server (Vault Transit API over HTTP), in one run:

1. hierarchy: ``KeyManager.get_or_create`` for ``--subjects`` new subjects in batches of ``--batch``
   (KMS KEK → wrapping key → subject keys; one flush per batch) — subjects/s and KMS calls;
2. baseline: what the reference design and Kroxylicious-style per-subject wrapping need — one KMS
   ``generate_dek`` per new subject (its EDEK written to the same keys topic, one flush per batch) —
   for ``--baseline`` subjects; subjects/s and KMS calls;
3. a cold reader in a fresh process: RSS before/after its key table has read all ``--subjects`` keys
   (SQLite local store, LRU of 100k unwrapped keys), time to catch up, then 1M record lookups spread over
   the subjects — KMS calls per 1M records (the baseline needs one unwrap per subject on a cold reader);
4. erasure propagation: a running reader holds a subject's key; time from ``erase`` returning (and from
   its start) until that reader refuses the key; 20 erasures, median and max.

Last line: ``RESULT keys ratio=<hierarchy subjects/s ÷ direct-KMS subjects/s> ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any

from strongroom.envelope import SubjectErased
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, create_keys_topic, erase
from strongroom.keys.records import SubjectKeyRecord
from strongroom.keys.topic import KeysWriter, now_ms
from strongroom.keys.wrapping import new_key_id
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.metered import MeteredKms
from strongroom.kms.vault import VaultKms
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.openbao import OpenBaoServer

KEK = "strongroom-subjects"


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def hierarchy(client: ClientConfig, kms: MeteredKms, topic: str, subjects: int, batch: int) -> dict[str, Any]:
    kms.reset()
    with KeyManager(client, kms, topic=topic, table_options={"register": False}) as manager:
        t0 = time.perf_counter()
        for start in range(0, subjects, batch):
            keys = manager.get_or_create(f"subject-{i}" for i in range(start, min(subjects, start + batch)))
            assert all(isinstance(k, SubjectKey) for k in keys.values())
            print(f"  hierarchy: {start + len(keys)} subjects, {time.perf_counter() - t0:.1f}s", flush=True)
        elapsed = time.perf_counter() - t0
        stats = manager.stats()
    return {
        "subjects": subjects,
        "seconds": round(elapsed, 2),
        "subjects_per_s": round(subjects / elapsed),
        "kms_calls": kms.calls,
        "wrapping_keys": stats["wrapping_keys_created"],
        "kms_calls_per_1m_subjects": round(kms.calls * 1_000_000 / subjects, 1),
    }


def direct_kms(client: ClientConfig, kms: MeteredKms, topic: str, subjects: int, batch: int) -> dict[str, Any]:
    """One KMS generate_dek per subject (the EDEK stands where the wrapped key would), same topic, same flushes."""
    from strongroom.keys.murmur2 import subject_partition

    kms.reset()
    kek_id = kms.resolve_alias(KEK)
    with KeysWriter(client, topic) as writer:
        t0 = time.perf_counter()
        for start in range(0, subjects, batch):
            records = []
            for i in range(start, min(subjects, start + batch)):
                subject = f"direct-{i}"
                pair = kms.generate_dek(kek_id)
                record = SubjectKeyRecord(subject, new_key_id(), b"\0" * 16, pair.edek.ciphertext, now_ms(), "")
                records.append((subject_partition(subject, 6), record))
            writer.write(records, error=RuntimeError)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - t0
    return {
        "subjects": subjects,
        "seconds": round(elapsed, 2),
        "subjects_per_s": round(subjects / elapsed),
        "kms_calls": kms.calls,
        "kms_calls_per_1m_subjects": round(kms.calls * 1_000_000 / subjects),
    }


def cold_reader(args: argparse.Namespace) -> None:
    """Runs in a fresh process: memory of a key table over every subject, KMS calls of 1M record reads."""
    client = ClientConfig(args.bootstrap, extra={"log_level": 0})
    kms = MeteredKms(VaultKms.from_config({"address": args.vault, "token": args.token}))
    before = rss_mib()
    t0 = time.perf_counter()
    table = KeyTable(client, kms, topic=args.topic, register=False).open()
    table.wait_caught_up(3600)
    caught_up = time.perf_counter() - t0
    after_catch_up = rss_mib()
    rng = random.Random(1)
    sample = [f"subject-{rng.randrange(args.subjects)}" for _ in range(100_000)]
    records = [(table.store.live_keys(s)[0].key_id, s) for s in sample]  # what 100k subjects' records carry
    reads = 1_000_000
    t0 = time.perf_counter()
    for _ in range(reads):
        key_id, subject = records[rng.randrange(len(records))]
        assert table.lookup(key_id, subject) is not None
    lookups = time.perf_counter() - t0
    result = {
        "rss_before_mib": round(before, 1),
        "rss_after_catch_up_mib": round(after_catch_up, 1),
        "rss_after_1m_reads_mib": round(rss_mib(), 1),
        "catch_up_seconds": round(caught_up, 1),
        "catch_up_records_per_s": round(table.stats()["records"] / caught_up),
        "store_mib": round(os.path.getsize(table.store.path) / 2**20, 1),
        "lookups_per_s": round(reads / lookups),
        "kms_calls_for_1m_reads": kms.calls,
        "lru": table.stats()["lru"],
    }
    table.close()
    print(json.dumps(result))


def propagation(client: ClientConfig, kms: MeteredKms, topic: str, rounds: int = 20) -> dict[str, Any]:
    victims = [f"victim-{i}" for i in range(rounds)]
    with KeyManager(client, kms, topic=topic, table_options={"register": False}) as manager:
        keys = manager.get_or_create(victims)
    after_return: list[float] = []
    after_start: list[float] = []
    with KeyTable(client, kms, topic=topic, register=False) as reader:
        reader.wait_caught_up(600)
        for subject in victims:
            key = keys[subject]
            assert isinstance(key, SubjectKey)
            assert reader.lookup(key.key_id, subject) is not None
            started = time.perf_counter()
            erase(client, [subject], reason="benchmark", topic=topic)
            returned = time.perf_counter()
            while True:
                try:
                    reader.lookup(key.key_id, subject)
                except SubjectErased:
                    break
                time.sleep(0.0005)
            refused = time.perf_counter()
            after_return.append(max(0.0, refused - returned))
            after_start.append(refused - started)
    return {
        "rounds": rounds,
        "after_erase_returned_ms": {
            "median": round(statistics.median(after_return) * 1000, 1),
            "max": round(max(after_return) * 1000, 1),
        },
        "after_erase_started_ms": {
            "median": round(statistics.median(after_start) * 1000, 1),
            "max": round(max(after_start) * 1000, 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subjects", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--baseline", type=int, default=2_000)
    parser.add_argument("--cold-reader", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--vault", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_reader:
        cold_reader(args)
        return

    with KafkaCluster(brokers=1, heap="1g") as cluster, OpenBaoServer() as bao:
        VaultKekAdmin(bao.client()).create_kek(KEK)
        kms = MeteredKms(VaultKms.from_config({"address": bao.address, "token": bao.token}))
        client = ClientConfig(cluster.bootstrap_servers, extra={"log_level": 0})
        create_keys_topic(client, "keys", partitions=6)
        create_keys_topic(client, "keys-direct", partitions=6)
        create_keys_topic(client, "keys-erasure", partitions=6)

        print(f"1. hierarchy: {args.subjects} new subjects, batches of {args.batch}", flush=True)
        tree = hierarchy(client, kms, "keys", args.subjects, args.batch)
        print(f"   {tree}", flush=True)
        print(f"2. baseline: one KMS generate_dek per subject, {args.baseline} subjects", flush=True)
        direct = direct_kms(client, kms, "keys-direct", args.baseline, min(args.batch, args.baseline))
        print(f"   {direct}", flush=True)

        print(f"3. cold reader over {args.subjects} subjects (fresh process)", flush=True)
        out = subprocess.run(
            [sys.executable, __file__, "--cold-reader", "--bootstrap", cluster.bootstrap_servers, "--topic", "keys",
             "--vault", bao.address, "--token", bao.token, "--subjects", str(args.subjects)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        reader = json.loads(out.stdout.strip().splitlines()[-1])
        reader["rss_delta_mib"] = round(reader["rss_after_catch_up_mib"] - reader["rss_before_mib"], 1)
        print(f"   {reader}", flush=True)

        print("4. erasure propagation to a running reader", flush=True)
        spread = propagation(client, kms, "keys-erasure")
        print(f"   {spread}", flush=True)

    ratio = tree["subjects_per_s"] / direct["subjects_per_s"]
    print(
        f"RESULT keys ratio={ratio:.1f} hierarchy={tree['subjects_per_s']}/s direct_kms={direct['subjects_per_s']}/s "
        f"kms_calls_per_1m_subjects={tree['kms_calls_per_1m_subjects']} "
        f"(direct: {direct['kms_calls_per_1m_subjects']}) "
        f"kms_calls_per_1m_cold_reads={reader['kms_calls_for_1m_reads']} "
        f"table_rss_delta_at_{args.subjects}={reader['rss_delta_mib']}MiB "
        f"erasure_propagation_median={spread['after_erase_returned_ms']['median']}ms"
    )


if __name__ == "__main__":
    main()
