"""The audit report: scrub history, alerts and operations in one self-contained HTML page + JSON.

:func:`collect` gathers the data (scrub summaries and alerts from the ledger path, operations from
the operations log when a cluster is given) into one JSON-serialisable dict; :func:`render_html`
draws it with :mod:`strongroom.audit.report_html` (inline SVG and CSS, no scripts, no external
resources - the page works offline and from a file:// URL).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strongroom.audit.alerts import Alert, read_alerts
from strongroom.audit.errors import LedgerNotFound
from strongroom.audit.oplog import Operation
from strongroom.audit.store import LedgerPaths
from strongroom.runtime import iso_utc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPORT_VERSION = 1
log = logging.getLogger(__name__)


def load_summaries(ledger: LedgerPaths, spark: SparkSession | None = None) -> list[dict[str, Any]]:
    """Every scrub summary under the ledger, oldest first. Unreadable files are skipped with a warning."""
    texts: list[tuple[str, str]] = []
    if ledger.is_local:
        directory = ledger.local(ledger.scrub_summaries)
        if directory.exists():
            texts = [(str(p), p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))]
    elif spark is not None:
        try:
            rows = spark.read.text(f"{ledger.scrub_summaries}/*", wholetext=True).collect()
            texts = [(ledger.scrub_summaries, r.value) for r in rows]
        except Exception as exc:  # noqa: BLE001 - no history yet
            log.warning("no scrub summaries under %s: %s", ledger.scrub_summaries, exc)
    out = []
    for name, text in texts:
        try:
            out.append(json.loads(text))
        except json.JSONDecodeError as exc:
            log.warning("skipping unreadable scrub summary %s: %s", name, exc)
    return sorted(out, key=lambda s: s.get("started_ms", 0))


def collect(
    ledger: LedgerPaths,
    *,
    operations: Sequence[Operation] = (),
    spark: SparkSession | None = None,
    max_timeline: int = 500,
) -> dict[str, Any]:
    """The report's data: latest scores per topic and span, score history, partitions, timeline."""
    summaries = load_summaries(ledger, spark)
    alerts = read_alerts(ledger.local(ledger.alerts) / "alerts.jsonl") if ledger.is_local else []
    if not summaries and not alerts and not operations:
        raise LedgerNotFound(
            f"nothing to report under {ledger.root}: no scrub has run and no alerts were recorded",
            hint="run `strongroom audit scrub --ledger ...` (and `audit watch --ledger ...`) first",
        )
    latest = summaries[-1] if summaries else None
    events = [
        *(_alert_event(a) for a in alerts),
        *(_scrub_event(s) for s in summaries),
        *(_operation_event(op) for op in operations),
    ]
    timeline = [e.to_json() for e in sorted(events, key=lambda e: e.at_ms)][-max_timeline:]
    topics = [] if latest is None else latest["topics"]
    return {
        "version": REPORT_VERSION,
        "generated_at": iso_utc(int(datetime.now(tz=UTC).timestamp() * 1000)),
        "ledger": ledger.root,
        "latest_run": None if latest is None else {k: latest[k] for k in LATEST_RUN_FIELDS},
        "topics": [_topic_view(t) for t in topics],
        "history": [_history_entry(s) for s in summaries],
        "partitions": []
        if latest is None
        else [{"topic": t["topic"], **p} for t in latest["topics"] for p in t["partitions"]],
        "examples": [] if latest is None else latest.get("examples", []),
        "timeline": timeline,
        "alerts": {
            severity: sum(1 for a in alerts if a.severity == severity) for severity in ("critical", "warning", "info")
        },
    }


#: What the report shows of the latest scrub run.
LATEST_RUN_FIELDS = ("run_id", "started_at", "finished_at", "span", "span_ms", "counts", "score")

#: Scrub statuses that are findings on the timeline (everything else is durable or not audited).
_NOT_FINDINGS = frozenset({"ok", "expired-justified", "unledgered"})


@dataclass(frozen=True)
class TimelineEvent:
    """One entry of the report's timeline: a watcher alert, a scrub run or a recorded operation."""

    at_ms: int
    at: str
    source: str
    severity: str
    kind: str
    topic: str | None
    partition: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _alert_event(a: Alert) -> TimelineEvent:
    return TimelineEvent(a.at_ms, iso_utc(a.at_ms), "watcher", a.severity, a.kind, a.topic, a.partition, a.message)


def _scrub_event(s: Mapping[str, Any]) -> TimelineEvent:
    bad = {k: v for k, v in s["counts"].items() if k not in _NOT_FINDINGS and v}
    if bad:
        text = "scrub found " + ", ".join(f"{v} {k}" for k, v in sorted(bad.items()))
        return TimelineEvent(s["started_ms"], s["started_at"], "scrub", "critical", "scrub-findings", None, None, text)
    text = f"scrub: {s['score']['audited']} records audited, {s['score']['display']}"
    return TimelineEvent(s["started_ms"], s["started_at"], "scrub", "info", "scrub", None, None, text)


def _operation_event(op: Operation) -> TimelineEvent:
    parts = ", ".join(f"[{c.partition}] {c.before_offset}->{c.after_offset}" for c in op.partitions)
    text = f"{op.kind} by {op.who}: {op.reason}" + (f" ({parts})" if parts else "")
    return TimelineEvent(op.when_ms, op.when, "operations-log", "info", op.kind, op.topic, None, text)


def _history_entry(s: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": s["run_id"],
        "at": s["started_at"],
        "at_ms": s["started_ms"],
        "score": s["score"],
        "topics": {t["topic"]: t["score"] for t in s["topics"]},
    }


def _topic_view(t: Mapping[str, Any]) -> dict[str, Any]:
    return {"topic": t["topic"], "score": t["score"], "counts": t["counts"], "spans": t["spans"],
            "config": t.get("config", {})}  # fmt: skip


def write_report(data: dict[str, Any], output_dir: Path) -> tuple[Path, Path]:
    """Write ``audit-report.html`` and ``audit-report.json``; returns their paths."""
    from strongroom.audit.report_html import render_html

    output_dir.mkdir(parents=True, exist_ok=True)
    html_path = output_dir / "audit-report.html"
    json_path = output_dir / "audit-report.json"
    html_path.write_text(render_html(data), encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return html_path, json_path
