"""A clean run under everyday churn - producers, consumer-group rebalances, a broker restart and a
broker kill -9 - must give zero false positives: a perfect score and no warning or critical alert."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from audit_helpers import CollectingSink, wait_for
from confluent_kafka import Consumer
from pyspark.sql import SparkSession

from strongroom.audit.alerts import Fanout
from strongroom.audit.ledger import capture_ledger
from strongroom.audit.ledger_view import LedgerView
from strongroom.audit.scrub import ScrubOptions, run_scrub
from strongroom.audit.store import LedgerPaths
from strongroom.audit.watch import Watcher
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.testing.kafka_cluster import KafkaCluster


def test_clean_run_with_rebalances_and_restarts_has_no_false_positives(
    spark: SparkSession,
    kafka_cluster3: KafkaCluster,
    new_topic3: Callable[..., str],
    new_group: str,
    ledger: LedgerPaths,
    tmp_path: Path,
) -> None:
    cluster = kafka_cluster3
    bs = cluster.bootstrap_servers
    client = ClientConfig(bs)
    topic = new_topic3(partitions=3, config={"min.insync.replicas": "2"})
    sink = CollectingSink()
    watcher = Watcher(client, topics=[topic], ledger=ledger, state_path=tmp_path / "w.json", sink=Fanout([sink]))
    done = threading.Event()
    capture_done = threading.Event()
    acked: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - surfaced by the test below
                errors.append(exc)

        return run

    def produce() -> None:
        producer = build_producer(client.producer({"linger.ms": 10}))

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked.append((msg.partition(), msg.offset()))

        i = 0
        while not done.is_set():
            producer.produce(topic, key=f"k{i % 50}".encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            time.sleep(0.005)
        assert producer.flush(120) == 0

    def consume_with_rebalances() -> None:
        members: list[Consumer] = []
        while not done.is_set():
            if len(members) < 2:
                c = build_consumer(client.consumer(new_group, {"session.timeout.ms": 10_000}))
                c.subscribe([topic])
                members.append(c)
            else:
                members.pop(0).close()  # leaves the group: a rebalance
            until = time.monotonic() + 2
            while time.monotonic() < until:
                for c in members:
                    c.poll(0.05)
        for c in members:
            c.close()

    def watch() -> None:
        watcher.run(interval=1.0, should_stop=done.is_set)

    batches: list[tuple[Any, ...]] = []  # for the failure message: what the streaming capture did

    def capture() -> None:
        def on_batch(p: Any) -> None:
            batches.append((p["batchId"], p["numInputRows"], p["timestamp"], p["sources"][0].get("endOffset")))

        capture_ledger(spark, client, [topic], ledger, once=False, trigger_seconds=1.0, stop=capture_done.is_set,
                       on_batch=on_batch)  # fmt: skip

    threads = [threading.Thread(target=guarded(f), daemon=True) for f in (produce, consume_with_rebalances, watch)]
    capture_thread = threading.Thread(target=guarded(capture), daemon=True)
    for t in [*threads, capture_thread]:
        t.start()

    def isr_full() -> bool:
        return all(len(cluster.partition_isr(topic, p)) == 3 for p in range(3))

    time.sleep(3)
    cluster.stop_broker(2)  # controlled shutdown: leaders move away
    time.sleep(2)
    cluster.start_broker(2)
    wait_for(cluster, "broker 2 back in every ISR", isr_full, timeout=90)
    cluster.kill_broker(3)  # kill -9: no controlled shutdown
    time.sleep(2)
    cluster.start_broker(3)
    wait_for(cluster, "broker 3 back in every ISR", isr_full, timeout=90)
    time.sleep(2)
    done.set()
    for t in threads:
        t.join(120)
    capture_done.set()
    capture_thread.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in [*threads, capture_thread]), "a worker thread did not finish"
    catch_up = capture_ledger(spark, client, [topic], ledger, once=True)  # catch up with the last writes
    watcher.poll_once()

    alerts = [a for a in sink.alerts if a.severity in ("warning", "critical")]
    assert alerts == [], [a.to_json() for a in alerts]
    assert any(a.kind == "leader-change" for a in sink.alerts), "the restarts moved leaders (info events)"

    summary = run_scrub(spark, client, ledger, ScrubOptions(span_ms=60_000)).to_json()
    assert len(acked) > 500
    nonzero = {k: v for k, v in summary["counts"].items() if v}
    view = LedgerView(ledger)
    coverage = {p: view.coverage(topic, p) for p in range(3)}
    if nonzero != {"ok": len(set(acked))}:  # pytest.fail: an assertion's message is cut short, this one is whole
        pytest.fail(
            f"scrub counts {nonzero}, expected {{'ok': {len(set(acked))}}}; ledger coverage {coverage}; "
            f"catch-up {catch_up.to_json()}; last streaming batches {batches[-3:]}"
        )
    assert summary["score"]["display"] == "perfect"
    assert summary["score"]["audited"] == len(set(acked))
