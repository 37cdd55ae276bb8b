"""Operations-log entries as JSON, and the report's HTML (no Kafka, no Spark)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from strongroom.audit.alerts import Alert, FileSink, read_alerts
from strongroom.audit.errors import LedgerNotFound, OperationsLogError
from strongroom.audit.oplog import DELETE_RECORDS, KEK_DELETION, Operation, PartitionChange, deletion_bounds
from strongroom.audit.report import collect, write_report
from strongroom.audit.report_html import render_html
from strongroom.audit.store import LedgerPaths


def test_operation_json_round_trip_keeps_every_field() -> None:
    op = Operation(
        kind=DELETE_RECORDS,
        topic="orders",
        reason="GDPR ticket 4711",
        partitions=(PartitionChange(0, 10, 1200), PartitionChange(1, None, 900)),
        plan_id="plan-7",
        details={"requested_by": "dpo"},
    )
    data = json.loads(json.dumps(op.to_json()))
    assert data["version"] == 1
    assert data["when"].endswith("+00:00")
    back = Operation.from_json(data, log_offset=3)
    assert back == Operation(**{**op.__dict__, "log_offset": 3})


def test_operation_validation() -> None:
    with pytest.raises(OperationsLogError, match="needs a reason"):
        Operation(kind=DELETE_RECORDS, reason="  ")
    with pytest.raises(OperationsLogError, match="kebab-case"):
        Operation(kind="drop table", reason="x")
    future = Operation(kind=KEK_DELETION, reason="rotated").to_json() | {"version": 99}
    with pytest.raises(OperationsLogError, match="newer than"):
        Operation.from_json(future)


def test_deletion_bounds_take_the_highest_prefix() -> None:
    ops = [
        Operation(kind=DELETE_RECORDS, topic="t", reason="a", partitions=(PartitionChange(0, 0, 10),), id="a"),
        Operation(kind=DELETE_RECORDS, topic="t", reason="b", partitions=(PartitionChange(0, 10, 30),), id="b"),
        Operation(kind=DELETE_RECORDS, topic="t", reason="c", partitions=(PartitionChange(1, 0, 5),), id="c"),
        Operation(kind=KEK_DELETION, topic="t", reason="d", partitions=(PartitionChange(0, 0, 99),), id="d"),
    ]
    assert deletion_bounds(ops) == {("t", 0): (30, "b"), ("t", 1): (5, "c")}


def _summary(run_id: str, at_ms: int, missing: int) -> dict[str, object]:
    score = {"durable": 100 - missing, "audited": 100, "perfect": missing == 0, "nines": None if not missing else 2.0,
             "demonstrable_nines": 2.0, "display": "perfect" if not missing else "2 nines"}  # fmt: skip
    counts = {"ok": 100 - missing, "missing": missing, "unledgered": 0}
    return {
        "run_id": run_id, "started_ms": at_ms, "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:00:05+00:00", "span": "1h", "span_ms": 3_600_000, "counts": counts,
        "score": score,
        "topics": [{
            "topic": "orders<script>", "counts": counts, "score": score, "config": {},
            "spans": [{"span_start_ms": at_ms, "span_start": "x", "span_end": "y", "score": score, "counts": counts}],
            "partitions": [{"partition": 0, "log_start": 0, "log_end": 100, "counts": counts, "score": score}],
        }],
        "examples": [{"topic": "orders<script>", "partition": 0, "offset": 7, "status": "missing", "reason": "gone"}],
    }  # fmt: skip


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def test_report_is_self_contained_and_escapes_names(tmp_path: Path) -> None:
    ledger = LedgerPaths(str(tmp_path / "ledger"))
    summaries = ledger.local(ledger.scrub_summaries)
    summaries.mkdir(parents=True)
    for i, missing in enumerate((0, 3)):
        (summaries / f"run{i}.json").write_text(
            json.dumps(_summary(f"run{i}", 1_800_000_000_000 + i * 60_000, missing))
        )
    (summaries / "broken.json").write_text("{not json")
    FileSink(ledger.local(ledger.alerts) / "alerts.jsonl").emit(
        [Alert("unclean-election", "critical", "broker 2 became leader", topic="orders<script>", partition=0)]
    )
    ops = [Operation(kind=DELETE_RECORDS, topic="orders", reason="ticket", partitions=(PartitionChange(0, 0, 5),))]
    data = collect(ledger, operations=ops)
    assert data["latest_run"]["run_id"] == "run1"
    assert [h["run_id"] for h in data["history"]] == ["run0", "run1"]
    assert {e["source"] for e in data["timeline"]} == {"watcher", "scrub", "operations-log"}
    assert data["alerts"]["critical"] == 1

    html_path, json_path = write_report(data, tmp_path / "out")
    html = html_path.read_text()
    assert json.loads(json_path.read_text())["latest_run"]["run_id"] == "run1"
    parser = _Collector()
    parser.feed(html)
    assert "script" not in parser.tags, "topic names are escaped, never markup"
    assert "orders&lt;script&gt;" in html
    assert parser.tags.count("svg") >= 4
    external = [v for k, v in parser.attrs if k in ("src", "href") and v]
    assert external == [], "no external resources"
    assert "2 nines" in html
    assert "perfect" in html


def test_report_without_anything_to_show_says_so(tmp_path: Path) -> None:
    with pytest.raises(LedgerNotFound, match="nothing to report"):
        collect(LedgerPaths(str(tmp_path / "empty")))


def test_empty_data_still_renders() -> None:
    html = render_html({"ledger": "x", "topics": [], "history": [], "timeline": [], "partitions": []})
    assert "no scrub yet" in html


def test_alert_file_skips_damaged_lines(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    FileSink(path).emit([Alert("truncation", "critical", "m", topic="t", partition=1)])
    with path.open("a") as fh:
        fh.write("garbage\n")
    FileSink(path).emit([Alert("leader-change", "info", "n")])
    assert [a.kind for a in read_alerts(path)] == ["truncation", "leader-change"]
