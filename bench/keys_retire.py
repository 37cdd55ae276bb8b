"""Seal leases in a writer's cold catch-up, before and after ``strongroom keys retire``.

Usage: .venv/bin/python bench/keys_retire.py [--subjects 100000] [--starts 5] [--rounds 3]

On one local Kafka broker (a fast-compacting keys topic) and a local KMS, in one run:

0. one writer creates ``--subjects`` keys, then ``--starts`` fresh writers each lease every key (what as many
   pipeline restarts leave behind);
1. a fresh writer's key table catches up, ``--rounds`` times: the baseline, every lease applied; then a
   reader's table (``seal_usage=False``, leases passed over) as often: what the same keys cost without leases;
2. ``keys retire`` (timed), then nudges until compaction has removed every lease record below the end
   offsets it read (timed; the run fails if they are still there after 5 minutes);
3. the same catch-up ``--rounds`` times after compaction;
4. one more writer, which makes each subject a new key (timed), then the catch-up ``--rounds`` times again.

Each catch-up is checked on a sample of 1,000 subjects: each must have a current key (steps 1 and 4) or
none (step 3: every key retired); a failed check stops the run. Medians.

Last line: ``RESULT keys-retire ratio=<catch-up after retire ÷ before> before_s=… no_leases_s=… after_s=…
after_new_keys_s=… retire_s=… compacted_s=… new_keys_s=… lease_entries=…``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, create_keys_topic
from strongroom.keys.cache import KeyCache
from strongroom.keys.errors import RetireFailed
from strongroom.keys.records import LEASE_PREFIX, LEASES_PREFIX, NudgeRecord
from strongroom.keys.retire import retire
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.runtime import now_ms
from strongroom.testing.kafka_cluster import KafkaCluster

TOPIC = "keys"
FAST_COMPACTION = {
    "segment.ms": "1000",
    "max.compaction.lag.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}
BATCH = 20_000


def write_all(client: ClientConfig, kms: LocalKms, subjects: list[str]) -> float:
    """One writer start: every subject's key (created, or leased again), in batches; seconds taken."""
    started = time.perf_counter()
    with KeyManager(client, kms, topic=TOPIC, table_options={"register": False}) as manager:
        cache = KeyCache(manager)
        for start in range(0, len(subjects), BATCH):
            cache.get_or_create(subjects[start : start + BATCH])
    return time.perf_counter() - started


def catch_ups(
    client: ClientConfig, kms: LocalKms, subjects: list[str], rounds: int, *, current: bool, seal_usage: bool = True
) -> float:
    """Median seconds a fresh table (a writer's by default) takes to catch up; checks what it then knows."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        with KeyTable(client, kms, topic=TOPIC, register=False, seal_usage=seal_usage) as table:
            table.wait_caught_up(900)
            times.append(time.perf_counter() - started)
            for subject in subjects[:: max(1, len(subjects) // 1000)]:
                has_key = table.subject_state(subject).current_key is not None
                if has_key != current:
                    sys.exit(f"check failed: {subject} {'has no' if current else 'still has a'} current key")
    print(f"  catch-up {', '.join(f'{t:.2f}' for t in times)} s", flush=True)
    return statistics.median(times)


def lease_records_below(client: ClientConfig, ends: dict[int, int]) -> int:
    keys_topic = KeysTopic(client, TOPIC)
    try:
        return sum(
            1
            for r in keys_topic.scan()
            if r.key is not None and r.key[:2] in (LEASE_PREFIX, LEASES_PREFIX) and r.offset < ends[r.partition]
        )
    finally:
        keys_topic.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    subjects = [f"s-{i}" for i in range(args.subjects)]
    work = Path(tempfile.mkdtemp(prefix="keys-retire-"))
    with KafkaCluster(brokers=1) as cluster:
        client = ClientConfig(cluster.bootstrap_servers, extra={"log_level": 0})
        kms = LocalKms.from_config({"path": str(work / "keyring.json"), "create": True})
        LocalKekAdmin(kms).create_kek("strongroom-subjects")
        create_keys_topic(client, TOPIC, config_overrides=FAST_COMPACTION)
        print(f"0. {args.subjects:,} subjects created in {write_all(client, kms, subjects):.1f} s", flush=True)
        for start in range(args.starts):
            print(f"   writer start {start + 1}: every key leased in {write_all(client, kms, subjects):.1f} s")
        print("1. before keys retire", flush=True)
        before = catch_ups(client, kms, subjects, args.rounds, current=True)
        print("   a reader's table, leases passed over", flush=True)
        no_leases = catch_ups(client, kms, subjects, args.rounds, current=True, seal_usage=False)

        keys_topic = KeysTopic(client, TOPIC)
        ends = {p: high for p, (_, high) in keys_topic.watermarks().items()}
        keys_topic.close()
        started = time.perf_counter()
        report = retire(client, topic=TOPIC).to_dict()
        retire_s = time.perf_counter() - started
        print(
            f"2. keys retire: {retire_s:.2f} s, {report['keys_retired']:,} keys, "
            f"{report['lease_records_dropped']} lease records ({report['lease_entries_dropped']:,} entries)"
        )
        started = time.perf_counter()
        with KeysWriter(client, TOPIC) as writer:
            while lease_records_below(client, ends):
                if time.perf_counter() - started > 300:
                    sys.exit("check failed: the dropped leases were not compacted away within 5 minutes")
                writer.write([(p, NudgeRecord(p, now_ms())) for p in ends], error=RetireFailed)
                time.sleep(2)
        compacted_s = time.perf_counter() - started
        print(f"   compacted away within {compacted_s:.0f} s", flush=True)
        print("3. after keys retire", flush=True)
        after = catch_ups(client, kms, subjects, args.rounds, current=False)
        new_keys_s = write_all(client, kms, subjects)
        print(f"4. the next writer made {args.subjects:,} new keys in {new_keys_s:.1f} s", flush=True)
        after_new = catch_ups(client, kms, subjects, args.rounds, current=True)
    print(
        f"RESULT keys-retire ratio={after / before:.2f} before_s={before:.2f} no_leases_s={no_leases:.2f} "
        f"after_s={after:.2f} "
        f"after_new_keys_s={after_new:.2f} retire_s={retire_s:.2f} compacted_s={compacted_s:.0f} "
        f"new_keys_s={new_keys_s:.1f} lease_entries={report['lease_entries_dropped']} subjects={args.subjects} "
        f"starts={args.starts}"
    )


if __name__ == "__main__":
    main()
