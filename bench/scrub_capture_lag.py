"""The ledger capture's lag alone, with each micro-batch's durations and the CPU of each process kind.

``scrub_throughput.py`` measures the lag once, after its scrub rounds; this runs only that part
(two producer processes at 100,000 records/s in all for 30 s, capture trigger 0.5 s, on a real 1-broker
KRaft cluster and a local[2] session), after an untimed warm-up capture of 8 s of the same load:

    .venv/bin/python bench/scrub_capture_lag.py [trigger-seconds]

It prints a sample of the batches' ``durationMs``, CPU seconds of the Spark JVM, the broker, the
driver and the producers from ``/proc``, and the lag of every captured record (``read_at -
timestamp``); the last line is ``RESULT capture-lag p99_s=... p50_s=... max_s=... rate=... batches=...``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import stat_cpu_seconds  # bench/ is on sys.path when a script in it runs
from scrub_throughput import LAG_PRODUCERS, LAG_RATE, LAG_SECONDS, paced_producer
from strongroom.audit.ledger import capture_ledger, read_ledger
from strongroom.audit.store import LedgerPaths
from strongroom.kafka.config import ClientConfig
from strongroom.spark.session import build_spark_session
from strongroom.testing.kafka_cluster import KafkaCluster

WARM_UP_SECONDS = 8.0


def cpu_seconds(pid: int) -> float:
    """CPU seconds so far of a live process (benchkit's ``/proc`` reading, which adds reaped children); of
    this process its own only, since the producers it reaps are counted apart."""
    if pid == os.getpid():
        return time.process_time()
    return stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), os.sysconf("SC_CLK_TCK"))[1]


def run(spark: Any, cluster: KafkaCluster, work: Path, name: str, seconds: float, trigger: float) -> dict[str, Any]:
    """Produce at LAG_RATE for ``seconds`` while the capture runs; the batches, CPU and lag figures."""
    bootstrap = cluster.bootstrap_servers
    client = ClientConfig(bootstrap)
    topic = cluster.create_topic(name, 4)
    ledger = LedgerPaths(str(work / name))
    ctx = mp.get_context("spawn")
    dones = [ctx.Event() for _ in range(LAG_PRODUCERS)]
    procs = [ctx.Process(target=paced_producer, args=(bootstrap, topic, LAG_RATE // LAG_PRODUCERS, seconds, d))
             for d in dones]  # fmt: skip
    pids = {"spark": spark.sparkContext._gateway.proc.pid, "broker": next(iter(cluster.nodes.values())).process.pid,
            "driver": os.getpid()}  # fmt: skip
    before = {kind: cpu_seconds(pid) for kind, pid in pids.items()}
    producers: dict[int, float] = {}

    def finished() -> bool:
        for p in procs:
            if p.is_alive() and p.pid is not None:
                with contextlib.suppress(OSError, IndexError):  # it just exited
                    producers[p.pid] = cpu_seconds(p.pid)  # the last reading before it exits
        return all(d.is_set() for d in dones) and not any(p.is_alive() for p in procs)

    for p in procs:
        p.start()
    batches: list[dict[str, Any]] = []
    started = time.monotonic()
    capture_ledger(spark, client, [topic], ledger, once=False, trigger_seconds=trigger, starting_offsets="earliest",
                   on_batch=batches.append, stop=finished)  # fmt: skip
    wall = time.monotonic() - started
    cpu = {kind: cpu_seconds(pid) - before[kind] for kind, pid in pids.items()}
    cpu["producers"] = sum(producers.values())
    for p in procs:
        p.join()
    capture_ledger(spark, client, [topic], ledger, once=True)  # the rest, so every record has a lag
    frame = read_ledger(spark, ledger).filter("kind = 'record'")
    p50, p99 = frame.selectExpr("read_at - timestamp AS lag").approxQuantile("lag", [0.5, 0.99], 0.001)
    stats = frame.selectExpr("count(*) AS n", "max(read_at - timestamp) AS mx", "min(timestamp) AS t0",
                             "max(timestamp) AS t1").collect()[0]  # fmt: skip
    rate = stats["n"] / max(0.001, (stats["t1"] - stats["t0"]) / 1000)
    return {"batches": batches, "wall": wall, "cpu": cpu, "records": stats["n"], "rate": rate,
            "p50": p50 / 1000, "p99": p99 / 1000, "max": stats["mx"] / 1000}  # fmt: skip


def main() -> int:
    trigger = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
    with (
        tempfile.TemporaryDirectory(prefix="strongroom-bench-lag-") as tmp,
        KafkaCluster(brokers=1, heap="1g") as cluster,
    ):
        spark = build_spark_session(app_name="bench-capture-lag", dataplane=True)
        try:
            run(spark, cluster, Path(tmp), "warm-up", WARM_UP_SECONDS, trigger)
            result = run(spark, cluster, Path(tmp), "lag", LAG_SECONDS, trigger)
        finally:
            spark.stop()
    batches = result["batches"]
    for batch in batches[:: max(1, len(batches) // 10)]:
        durations = {k: v for k, v in batch.get("durationMs", {}).items() if v}
        print(f"batch {batch['batchId']}: {batch['numInputRows']:,} rows, ms {durations}")
    print(f"CPU seconds over {result['wall']:.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in result["cpu"].items()))
    print(f"capture lag at {result['rate']:,.0f} records/s produced ({result['records']:,} records): "
          f"p50 {result['p50']:.2f}s, p99 {result['p99']:.2f}s, max {result['max']:.2f}s")  # fmt: skip
    print(f"RESULT capture-lag p99_s={result['p99']:.2f} p50_s={result['p50']:.2f} max_s={result['max']:.2f} "
          f"rate={result['rate']:.0f} batches={len(batches)} trigger_s={trigger}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
