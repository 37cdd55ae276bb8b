"""Deletions told apart on a real 3-broker cluster: unrecorded delete-records, recorded delete-records
(``strongroom audit justify --execute``) and retention - by the scrub and by the watcher, whose alerts
reach stdout, a Kafka topic, a webhook and the Prometheus endpoint."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from audit_helpers import produce, wait_until
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.sql import SparkSession

from strongroom.audit.alerts import Fanout, FileSink, KafkaSink, StdoutSink, WebhookSink
from strongroom.audit.ledger import capture_ledger
from strongroom.audit.metrics import WatchMetrics
from strongroom.audit.oplog import OperationsLog
from strongroom.audit.store import LedgerPaths
from strongroom.audit.watch import Watcher
from strongroom.cli.main import main
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer
from strongroom.testing.kafka_cluster import KafkaCluster


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[HTTPServer]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def log_start(cluster: KafkaCluster, topic: str, partition: int) -> int:
    consumer = build_consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "x"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[0])
    finally:
        consumer.close()


def test_unrecorded_and_recorded_deletions_and_retention(
    spark: SparkSession,
    kafka_cluster3: KafkaCluster,
    new_topic3: Callable[..., str],
    unique_name: Callable[[str], str],
    ledger: LedgerPaths,
    tmp_path: Path,
    webhook: HTTPServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bs = kafka_cluster3.bootstrap_servers
    client = ClientConfig(bs)
    deleted = new_topic3(partitions=2)
    retained = new_topic3(partitions=1)
    for p in (0, 1):
        produce(bs, deleted, (f"d{p}-{i}".encode() for i in range(40)), partition=p)
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    produce(bs, retained, (f"r{i}".encode() for i in range(30)), timestamp=an_hour_ago)
    capture_ledger(spark, client, [deleted, retained], ledger, once=True)

    alerts_topic = unique_name("alerts")
    metrics = WatchMetrics()
    port = metrics.serve(0)
    hook_url = f"http://127.0.0.1:{webhook.server_port}/hook"
    alerts_file = ledger.local(ledger.alerts) / "alerts.jsonl"
    fanout = Fanout([StdoutSink(), FileSink(alerts_file), KafkaSink(client, alerts_topic), WebhookSink(hook_url)])
    watcher = Watcher(client, topics=[deleted, retained], ledger=ledger, state_path=tmp_path / "w.json",
                      sink=fanout, metrics=metrics)  # fmt: skip
    try:
        assert watcher.poll_once() == []

        kafka_cluster3.delete_records_tool({(deleted, 0): 10})  # nobody recorded why
        # a justification past the log's end (40) would excuse the loss of records written later: refused
        assert main(["audit", "justify", "-b", bs, "--topic", deleted, "--partition", "1", "--up-to-offset", "41",
                     "--reason", "a typo"]) == 2  # fmt: skip
        assert "--up-to-offset 41 is beyond the end of" in capsys.readouterr().err
        assert OperationsLog(client).read(topic=deleted) == []
        assert main(["audit", "justify", "-b", bs, "--topic", deleted, "--partition", "1", "--up-to-offset", "10",
                     "--reason", "erasure ticket 4711", "--execute"]) == 0  # fmt: skip
        admin = kafka_cluster3.admin()
        entry = ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, retained, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: log_start(kafka_cluster3, retained, 0) == 30, 60, "retention to delete the old records")
        assert log_start(kafka_cluster3, deleted, 1) == 10
        capsys.readouterr()

        found = {(a.kind, a.severity, a.topic, a.partition) for a in watcher.poll_once()}
        assert found == {
            ("lso-advance-unjustified", "critical", deleted, 0),
            ("lso-advance-justified", "info", deleted, 1),
            ("lso-advance-justified", "info", retained, 0),
            ("config-weakened", "warning", retained, None),
        }
        stdout = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        assert {(a["kind"], a["partition"]) for a in stdout} >= {("lso-advance-unjustified", 0)}
        hooked = {(a["kind"], a["topic"], a["partition"]) for a in webhook.received}  # type: ignore[attr-defined]
        assert (("lso-advance-unjustified", deleted, 0)) in hooked
        assert len(webhook.received) == 4  # type: ignore[attr-defined]

        scrape = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert 'strongroom_audit_alerts_total{kind="lso-advance-unjustified",severity="critical"} 1.0' in scrape
        assert f'strongroom_audit_log_start_offset{{partition="0",topic="{deleted}"}} 10.0' in scrape
        assert "strongroom_audit_polls_total 2.0" in scrape
    finally:
        fanout.close()
        metrics.close()

    consumer = build_consumer({"bootstrap.servers": bs, "group.id": unique_name("g"), "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(alerts_topic, 0, 0)])
    on_topic = []
    deadline = time.monotonic() + 30
    while len(on_topic) < 4 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            on_topic.append((msg.key().decode(), json.loads(msg.value())["kind"]))
    consumer.close()
    assert (deleted, "lso-advance-unjustified") in on_topic
    assert len(on_topic) == 4

    # The scrub tells the three deletions apart and counts only the unrecorded one against the score.
    capsys.readouterr()
    code = main(["--output", "json", "audit", "scrub", "-b", bs, "--ledger", ledger.root, "--span", "1h"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 4, "records were lost"
    by_topic = {t["topic"]: t for t in summary["topics"]}
    parts = {p["partition"]: p["counts"] for p in by_topic[deleted]["partitions"]}
    assert parts[0] == {"ok": 30, "expired-unjustified": 10}
    assert parts[1] == {"ok": 30, "expired-justified": 10}
    assert by_topic[retained]["counts"]["expired-justified"] == 30
    assert by_topic[retained]["score"]["display"] == "perfect"
    reasons = {e["reason"] for e in summary["examples"] if e["topic"] == deleted}
    assert any("no recorded deletion" in r for r in reasons)
    assert summary["score"] == {**summary["score"], "audited": 110, "durable": 100, "display": "1 nines"}

    out_dir = tmp_path / "report"
    assert main(["audit", "report", "--ledger", ledger.root, "--output-dir", str(out_dir), "-b", bs]) == 0
    report = json.loads((out_dir / "audit-report.json").read_text())
    sources = {e["source"] for e in report["timeline"]}
    assert sources == {"watcher", "scrub", "operations-log"}
    assert deleted in (out_dir / "audit-report.html").read_text()
