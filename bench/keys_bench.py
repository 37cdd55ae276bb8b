"""Keys at pipeline speed: key creation, warm lookups, cold catch-up, key-table memory, erasure propagation.

Usage: .venv/bin/python bench/keys_bench.py [--subjects 1000000] [--batch 50000] [--baseline 2000] [--rounds 3]

On one local Kafka broker and an OpenBao dev server (Vault Transit API over HTTP), in one run:

0. warm-up (untimed): ``--batch`` subjects created and read back, so the broker, the JIT-less Python
   paths and SQLite's page cache are not part of round one;
1. creation, ``--rounds`` rounds interleaved with the baseline: ``KeyManager.get_or_create`` for
   ``--subjects / --rounds`` new subjects per round in batches of ``--batch`` (KMS KEK → wrapping
   key → subject keys; one produce, one flush and the read-back per batch) — new subjects/s made
   durable, median of the rounds; every returned key is checked (stored, with its offset);
   baseline: what the reference design and Kroxylicious-style per-subject wrapping need — one KMS
   ``generate_dek`` per new subject (its EDEK written to the same keys topic, one flush per batch) —
   for ``--baseline / --rounds`` subjects per round;
2. a cold reader in a fresh process: catches up with the whole keys topic (records/s), its RSS growth
   at one million records and at ten million (when there are that many), then warm lookups of
   records spread over 100k subjects (``lookup`` one at a time and ``lookup_many`` per 40k-record
   batch, ``--rounds`` rounds each, medians); it checks a sample of keys against what creation
   returned (SHA-256 fingerprints, never the keys) — an unequal key fails the run;
3. erasure propagation: a running reader holds a subject's key; time from ``erase`` returning (and from
   its start) until that reader refuses the key; 20 erasures, median and max.

Last line: ``RESULT keys-create ratio=<new subjects/s ÷ 5,000 (issue 13's figure before this work)>
create_rps=… lookup_rps=… cold_catchup_rps=… rss_1m=… rss_10m=…`` (``lookup_rps``: ``lookup_many`` per
40k-record batch, as the pipelines look keys up; the one-at-a-time rate is on the line before; RSS
growth of the cold key table in MiB, ``na`` when the run had fewer subjects).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from strongroom.envelope import SubjectErased
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, create_keys_topic, erase
from strongroom.keys.records import SubjectKeyRecord
from strongroom.keys.topic import KeysWriter
from strongroom.keys.wrapping import new_key_id
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.metered import MeteredKms
from strongroom.kms.vault import VaultKms
from strongroom.runtime import now_ms
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.openbao import OpenBaoServer

KEK = "strongroom-subjects"
#: New subjects/s before this work (issue 13): the ratio's denominator.
REFERENCE_CREATE_RPS = 5000
SAMPLE = 2000  # keys per creation round whose fingerprints the cold reader checks
LOOKUP_BATCH = 40_000  # records per Arrow batch in the measurement


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fingerprint(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def create_round(manager: KeyManager, prefix: str, count: int, batch: int, sample: dict[str, str]) -> float:
    """New subjects/s of one round; every key checked; a few fingerprints kept for the cold reader."""
    t0 = time.perf_counter()
    for start in range(0, count, batch):
        keys = manager.get_or_create(f"{prefix}-{i}" for i in range(start, min(count, start + batch)))
        for key in keys.values():
            if not isinstance(key, SubjectKey) or not key.stored or key.offset is None or len(key.key) != 32:
                raise SystemExit(f"creation returned {key!r} for a new subject")
        for subject in list(keys)[:: max(1, len(keys) * 4 // SAMPLE)][: SAMPLE // 4]:
            made = keys[subject]
            assert isinstance(made, SubjectKey)
            sample[subject] = fingerprint(made.key)
    return count / (time.perf_counter() - t0)


def direct_round(writer: KeysWriter, kms: MeteredKms, prefix: str, count: int, batch: int) -> float:
    """One KMS generate_dek per subject (the EDEK stands where the wrapped key would), same topic, same flushes."""
    from strongroom.keys.murmur2 import subject_partition

    kek_id = kms.resolve_alias(KEK)
    t0 = time.perf_counter()
    for start in range(0, count, batch):
        records = []
        for i in range(start, min(count, start + batch)):
            subject = f"{prefix}-{i}"
            pair = kms.generate_dek(kek_id)
            record = SubjectKeyRecord(subject, new_key_id(), b"\0" * 16, pair.edek.ciphertext, now_ms(), "")
            records.append((subject_partition(subject, 6), record))
        offsets = writer.write(records, error=RuntimeError)  # type: ignore[arg-type]
        assert len(offsets) == len(records)
    return count / (time.perf_counter() - t0)


def creation(client: ClientConfig, kms: MeteredKms, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    per_round = args.subjects // args.rounds
    sample: dict[str, str] = {}
    tree: list[float] = []
    direct: list[float] = []
    kms.reset()
    with (
        KeyManager(client, kms, topic="keys", table_options={"register": False}) as manager,
        KeysWriter(client, "keys-direct") as writer,
    ):
        print("0. warm-up (untimed)", flush=True)
        create_round(manager, "warmup", min(args.batch, 20_000), args.batch, {})
        direct_round(writer, kms, "warmup", 50, 50)
        kms.reset()
        for r in range(args.rounds):
            tree.append(create_round(manager, f"subject-r{r}", per_round, args.batch, sample))
            direct.append(direct_round(writer, kms, f"direct-r{r}", args.baseline // args.rounds, args.batch))
            print(f"  round {r + 1}: hierarchy {tree[-1]:,.0f}/s, direct KMS {direct[-1]:,.0f}/s", flush=True)
        stats = manager.stats()
        calls = kms.calls
    return {
        "subjects": per_round * args.rounds,
        "rounds_per_s": [round(x) for x in tree],
        "subjects_per_s": round(statistics.median(tree)),
        "direct_rounds_per_s": [round(x) for x in direct],
        "direct_subjects_per_s": round(statistics.median(direct)),
        "wrapping_keys": stats["wrapping_keys_created"],
        "kms_calls_incl_baseline": calls,
        "batches": stats["batches"],
    }, sample


def cold_reader(args: argparse.Namespace) -> None:
    """Runs in a fresh process: catch-up speed and memory of a key table over every subject, warm lookups."""
    client = ClientConfig(args.bootstrap, extra={"log_level": 0})
    kms = MeteredKms(VaultKms.from_config({"address": args.vault, "token": args.token}))
    with open(args.sample) as fh:
        sample: dict[str, str] = json.load(fh)
    before = rss_mib()
    marks: dict[int, float] = {}
    t0 = time.perf_counter()
    table = KeyTable(client, kms, topic=args.topic, register=False).open()
    ends = {p: high for p, (_, high) in table.follower.watermarks().items()}
    total = sum(ends.values())
    while True:  # the RSS growth at 1M and 10M records on the way
        applied = table.follower.counters["records"]
        for mark in (1_000_000, 10_000_000):
            if mark not in marks and applied >= mark:
                marks[mark] = rss_mib() - before
        if all(table.applied_offsets().get(p, 0) >= end for p, end in ends.items()):
            break
        table.follower.check_alive()
        time.sleep(0.05)
    caught_up = time.perf_counter() - t0
    records = table.follower.counters["records"]
    rss_after = rss_mib() - before
    for mark in (1_000_000, 10_000_000):
        if mark not in marks and records >= mark * 0.999:  # the warm-up and layout records are extra
            marks[mark] = rss_after
    # every sampled key opens under the cold table and is the key creation handed out
    for subject, expected in sample.items():
        (stored,) = table.store.live_keys(subject)
        key = table.lookup(stored.key_id, subject)
        if key is None or fingerprint(key) != expected:
            raise SystemExit("the cold key table holds another key for a sampled subject than creation returned")
    rng = random.Random(1)
    subjects = [
        s for s in (f"subject-r{rng.randrange(args.rounds)}-{rng.randrange(args.per_round)}" for _ in range(100_000))
    ]
    ids = [table.store.live_keys(s)[0].key_id for s in subjects]  # what 100k subjects' records carry
    table.warm(ids)
    reads = 1_000_000
    picks = [rng.randrange(len(ids)) for _ in range(reads)]
    stream = [ids[i] for i in picks]
    single: list[float] = []
    batched: list[float] = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        lookup = table.lookup
        found = 0
        for key_id in stream:
            if lookup(key_id) is not None:
                found += 1
        single.append(reads / (time.perf_counter() - t0))
        assert found == reads, f"{reads - found} warm lookups missed"
        t0 = time.perf_counter()
        found = 0
        for start in range(0, reads, LOOKUP_BATCH):
            keys = table.lookup_many(stream[start : start + LOOKUP_BATCH])
            found += len(keys) - keys.count(None)
        batched.append(reads / (time.perf_counter() - t0))
        assert found == reads, f"{reads - found} warm batch lookups missed"
    result = {
        "records": records,
        "rss_before_mib": round(before, 1),
        "rss_delta_mib": round(rss_after, 1),
        "rss_delta_at_1m_mib": None if 1_000_000 not in marks else round(marks[1_000_000], 1),
        "rss_delta_at_10m_mib": None if 10_000_000 not in marks else round(marks[10_000_000], 1),
        "catch_up_seconds": round(caught_up, 1),
        "catch_up_records_per_s": round(records / caught_up),
        "store_mib": round(os.path.getsize(table.store.path) / 2**20, 1),
        "lookup_rounds_per_s": [round(x) for x in single],
        "lookups_per_s": round(statistics.median(single)),
        "lookup_many_rounds_per_s": [round(x) for x in batched],
        "lookup_many_per_s": round(statistics.median(batched)),
        "kms_calls_for_catch_up_and_reads": kms.calls,
        "lru": table.stats()["lru"],
        "sampled_keys_checked": len(sample),
        "topic_records": total,
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold-reader", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--vault", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--sample", help=argparse.SUPPRESS)
    parser.add_argument("--per-round", type=int, help=argparse.SUPPRESS)
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

        print(f"1. creation: {args.subjects} new subjects in {args.rounds} rounds, batches of {args.batch}", flush=True)
        tree, sample = creation(client, kms, args)
        print(f"   {tree}", flush=True)

        print(f"2. cold reader over {tree['subjects']} subjects (fresh process)", flush=True)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
            json.dump(sample, fh)
            fh.flush()
            out = subprocess.run(
                [sys.executable, __file__, "--cold-reader", "--bootstrap", cluster.bootstrap_servers, "--topic", "keys",
                 "--vault", bao.address, "--token", bao.token, "--sample", fh.name, "--rounds", str(args.rounds),
                 "--per-round", str(args.subjects // args.rounds)],
                capture_output=True, text=True,
            )  # fmt: skip
        if out.returncode:
            raise SystemExit(f"the cold reader failed: {out.stderr[-2000:]}")
        reader = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"   {reader}", flush=True)

        print("3. erasure propagation to a running reader", flush=True)
        spread = propagation(client, kms, "keys-erasure")
        print(f"   {spread}", flush=True)

    def mib(value: float | None) -> str:
        return "na" if value is None else f"{value}MiB"

    print(
        f"   direct KMS baseline {tree['direct_subjects_per_s']}/s; one-at-a-time lookups {reader['lookups_per_s']}/s; "
        f"erasure propagation median {spread['after_erase_returned_ms']['median']}ms"
    )
    print(
        f"RESULT keys-create ratio={tree['subjects_per_s'] / REFERENCE_CREATE_RPS:.2f} "
        f"create_rps={tree['subjects_per_s']} lookup_rps={reader['lookup_many_per_s']} "
        f"cold_catchup_rps={reader['catch_up_records_per_s']} "
        f"rss_1m={mib(reader['rss_delta_at_1m_mib'])} rss_10m={mib(reader['rss_delta_at_10m_mib'])}"
    )


if __name__ == "__main__":
    main()
