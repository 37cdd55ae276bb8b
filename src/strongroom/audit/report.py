"""The audit report: scrub history, alerts and operations in one self-contained HTML page + JSON.

:func:`collect` gathers the data (scrub summaries and alerts from the ledger path, operations from
the operations log when a cluster is given) into one JSON-serialisable dict; :func:`render_html`
draws it with :mod:`strongroom.audit.report_html` (inline SVG and CSS, no scripts, no external
resources - the page works offline and from a file:// URL).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strongroom.audit.alerts import read_alerts
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
    history = []
    for s in summaries:
        history.append(
            {
                "run_id": s["run_id"],
                "at": s["started_at"],
                "at_ms": s["started_ms"],
                "score": s["score"],
                "topics": {t["topic"]: t["score"] for t in s["topics"]},
            }
        )
    timeline: list[dict[str, Any]] = []
    for a in alerts:
        timeline.append(
            {
                "at_ms": a.at_ms,
                "at": iso_utc(a.at_ms),
                "source": "watcher",
                "severity": a.severity,
                "kind": a.kind,
                "topic": a.topic,
                "partition": a.partition,
                "text": a.message,
            }
        )
    for s in summaries:
        bad = {k: v for k, v in s["counts"].items() if k not in ("ok", "expired-justified", "unledgered") and v}
        severity = "critical" if bad else "info"
        text = (
            "scrub found " + ", ".join(f"{v} {k}" for k, v in sorted(bad.items()))
            if bad
            else f"scrub: {s['score']['audited']} records audited, {s['score']['display']}"
        )
        timeline.append(
            {
                "at_ms": s["started_ms"],
                "at": s["started_at"],
                "source": "scrub",
                "severity": severity,
                "kind": "scrub-findings" if bad else "scrub",
                "topic": None,
                "partition": None,
                "text": text,
            }
        )
    for op in operations:
        parts = ", ".join(f"[{c.partition}] {c.before_offset}->{c.after_offset}" for c in op.partitions)
        timeline.append(
            {
                "at_ms": op.when_ms,
                "at": op.when,
                "source": "operations-log",
                "severity": "info",
                "kind": op.kind,
                "topic": op.topic,
                "partition": None,
                "text": f"{op.kind} by {op.who}: {op.reason}" + (f" ({parts})" if parts else ""),
            }
        )
    timeline.sort(key=lambda e: e["at_ms"])
    if len(timeline) > max_timeline:
        timeline = timeline[-max_timeline:]
    partitions = []
    if latest is not None:
        for t in latest["topics"]:
            for p in t["partitions"]:
                partitions.append({"topic": t["topic"], **p})
    return {
        "version": REPORT_VERSION,
        "generated_at": iso_utc(int(datetime.now(tz=UTC).timestamp() * 1000)),
        "ledger": ledger.root,
        "latest_run": None
        if latest is None
        else {k: latest[k] for k in ("run_id", "started_at", "finished_at", "span", "span_ms", "counts", "score")},
        "topics": []
        if latest is None
        else [
            {
                "topic": t["topic"],
                "score": t["score"],
                "counts": t["counts"],
                "spans": t["spans"],
                "config": t.get("config", {}),
            }
            for t in latest["topics"]
        ],
        "history": history,
        "partitions": partitions,
        "examples": [] if latest is None else latest.get("examples", []),
        "timeline": timeline,
        "alerts": {
            "critical": sum(1 for a in alerts if a.severity == "critical"),
            "warning": sum(1 for a in alerts if a.severity == "warning"),
            "info": sum(1 for a in alerts if a.severity == "info"),
        },
    }


def write_report(data: dict[str, Any], output_dir: Path) -> tuple[Path, Path]:
    """Write ``audit-report.html`` and ``audit-report.json``; returns their paths."""
    from strongroom.audit.report_html import render_html

    output_dir.mkdir(parents=True, exist_ok=True)
    html_path = output_dir / "audit-report.html"
    json_path = output_dir / "audit-report.json"
    html_path.write_text(render_html(data), encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return html_path, json_path
