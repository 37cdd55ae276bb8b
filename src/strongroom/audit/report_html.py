"""HTML rendering of the audit report: inline CSS and SVG only (no scripts, fonts or network)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

SEVERITY_COLOR = {"critical": "#c0392b", "warning": "#e67e22", "info": "#2e86c1"}
NINES_CAP = 12.0

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px;color:#1b2631;background:#fff}
h1{font-size:24px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5d8dc}
.sub{color:#566573;font-size:13px} .cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{border:1px solid #d5d8dc;border-radius:6px;padding:10px 14px;min-width:150px}
.card .v{font-size:22px;font-weight:600} .card .l{font-size:12px;color:#566573}
table{border-collapse:collapse;font-size:12px;width:100%}
th,td{border:1px solid #e5e8e8;padding:4px 6px;text-align:right}
th{background:#f4f6f6} td.l,th.l{text-align:left} .bad{color:#c0392b;font-weight:600} .ok{color:#1e8449}
svg text{font-family:inherit}
"""


def nines_color(score: Mapping[str, Any] | None) -> str:
    if not score or score.get("audited", 0) == 0:
        return "#bfc9ca"
    if score.get("perfect"):
        return "#145a32"
    n = float(score.get("nines") or 0.0)
    if n >= 6:
        return "#1e8449"
    if n >= 4:
        return "#52be80"
    if n >= 3:
        return "#f4d03f"
    if n >= 2:
        return "#e67e22"
    return "#c0392b"


def _short(score: Mapping[str, Any] | None) -> str:
    if not score or score.get("audited", 0) == 0:
        return "n/a"
    if score.get("perfect"):
        return "✓"
    return f"{score.get('nines')}"


def _plot_value(score: Mapping[str, Any] | None) -> float | None:
    if not score or score.get("audited", 0) == 0:
        return None
    if score.get("perfect"):
        return min(NINES_CAP, float(score.get("demonstrable_nines") or 0.0))
    return min(NINES_CAP, float(score.get("nines") or 0.0))


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%m-%d %H:%M")


# ------------------------------------------------------------------------------------ charts


def heatmap(topics: Sequence[Mapping[str, Any]], max_spans: int = 36) -> str:
    """Topics x spans, each cell coloured by its nines (the latest scrub)."""
    spans = sorted({s["span_start_ms"] for t in topics for s in t["spans"]})[-max_spans:]
    if not topics or not spans:
        return '<p class="sub">No audited spans yet.</p>'
    label_w, cell_w, cell_h, top = 220, 44, 26, 58
    width = label_w + cell_w * len(spans) + 70
    height = top + cell_h * len(topics) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             'aria-label="durability nines per topic per span">']  # fmt: skip
    for i, span in enumerate(spans):
        x = label_w + i * cell_w + cell_w / 2
        parts.append(f'<text x="{x}" y="{top - 8}" font-size="10" text-anchor="start" '
                     f'transform="rotate(-40 {x} {top - 8})">{escape(_time(span))}</text>')  # fmt: skip
    for j, topic in enumerate(topics):
        y = top + j * cell_h
        parts.append(f'<text x="{label_w - 6}" y="{y + cell_h / 2 + 4}" font-size="12" text-anchor="end">'
                     f"{escape(topic['topic'][:32])}</text>")  # fmt: skip
        by_span = {s["span_start_ms"]: s for s in topic["spans"]}
        for i, span in enumerate(spans):
            x = label_w + i * cell_w
            s = by_span.get(span)
            score = s["score"] if s else None
            tip = f"{topic['topic']} {_time(span)}: " + (
                f"{score['display']} ({score['durable']}/{score['audited']})" if score else "no records"
            )
            parts.append(
                f'<rect x="{x + 1}" y="{y + 1}" width="{cell_w - 2}" height="{cell_h - 2}" rx="3" '
                f'fill="{nines_color(score)}"><title>{escape(tip)}</title></rect>'
                f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 4}" font-size="11" text-anchor="middle" '
                f'fill="#fff">{escape(_short(score))}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def nines_bars(topics: Sequence[Mapping[str, Any]]) -> str:
    """One bar per topic: its nines (perfect scores drawn to the nines they can demonstrate)."""
    if not topics:
        return ""
    label_w, bar_w, row_h = 220, 520, 24
    height = 30 + row_h * len(topics)
    width = label_w + bar_w + 240
    scale = bar_w / NINES_CAP
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             'aria-label="nines per topic">']  # fmt: skip
    for k in range(0, int(NINES_CAP) + 1, 3):
        x = label_w + k * scale
        parts.append(f'<line x1="{x}" y1="8" x2="{x}" y2="{height - 6}" stroke="#e5e8e8"/>'
                     f'<text x="{x}" y="{height}" font-size="10" text-anchor="middle">{k}</text>')  # fmt: skip
    for j, topic in enumerate(topics):
        y = 10 + j * row_h
        score = topic["score"]
        value = _plot_value(score) or 0.0
        label = score["display"]
        if score.get("perfect"):
            label = f"perfect (≥{score.get('demonstrable_nines')} nines shown by {score['audited']} records)"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 15}" font-size="12" text-anchor="end">'
            f"{escape(topic['topic'][:32])}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{max(2.0, value * scale):.1f}" height="{row_h - 8}" '
            f'fill="{nines_color(score)}"/>'
            f'<text x="{label_w + max(2.0, value * scale) + 6:.1f}" y="{y + 15}" font-size="11">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def history_chart(history: Sequence[Mapping[str, Any]]) -> str:
    """Nines per topic over scrub runs."""
    if len(history) < 1:
        return ""
    topics = sorted({t for h in history for t in h["topics"]})
    width, height, left, bottom = 900, 220, 50, 30
    t0, t1 = history[0]["at_ms"], history[-1]["at_ms"]
    span = max(1, t1 - t0)
    palette = ["#2e86c1", "#8e44ad", "#16a085", "#d35400", "#2c3e50", "#c0392b", "#7f8c8d"]

    def xy(at: int, value: float) -> tuple[float, float]:
        x = left + (width - left - 20) * ((at - t0) / span if t1 > t0 else 0.5)
        y = 10 + (height - bottom - 10) * (1 - value / NINES_CAP)
        return x, y

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20 * len(topics)}" '
             'role="img" aria-label="nines over scrub runs">']  # fmt: skip
    for k in range(0, int(NINES_CAP) + 1, 3):
        _, y = xy(t0, k)
        parts.append(f'<line x1="{left}" y1="{y}" x2="{width - 20}" y2="{y}" stroke="#e5e8e8"/>'
                     f'<text x="{left - 6}" y="{y + 4}" font-size="10" text-anchor="end">{k}</text>')  # fmt: skip
    parts.append(f'<text x="{left}" y="{height - 8}" font-size="10">{escape(_time(t0))}</text>')
    parts.append(f'<text x="{width - 20}" y="{height - 8}" font-size="10" text-anchor="end">{escape(_time(t1))}</text>')
    for i, topic in enumerate(topics):
        color = palette[i % len(palette)]
        points = []
        for h in history:
            value = _plot_value(h["topics"].get(topic))
            if value is not None:
                points.append((*xy(h["at_ms"], value), h["topics"][topic]))
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y, score in points:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}">'
                         f"<title>{escape(topic)}: {escape(score['display'])}</title></circle>")  # fmt: skip
        ly = height + 14 + 20 * i
        parts.append(f'<rect x="{left}" y="{ly - 9}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{left + 18}" y="{ly + 1}" font-size="12">{escape(topic)}</text>')  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def timeline_chart(events: Sequence[Mapping[str, Any]]) -> str:
    """Events on a time axis, one lane per source, coloured by severity."""
    if not events:
        return '<p class="sub">No incidents, scrubs or operations recorded.</p>'
    lanes = ["watcher", "scrub", "operations-log"]
    width, lane_h, left = 900, 34, 120
    t0 = min(e["at_ms"] for e in events)
    t1 = max(e["at_ms"] for e in events)
    span = max(1, t1 - t0)
    height = 30 + lane_h * len(lanes)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             'aria-label="incident timeline">']  # fmt: skip
    for i, lane_name in enumerate(lanes):
        y = 10 + i * lane_h + lane_h / 2
        parts.append(f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">{lane_name}</text>'
                     f'<line x1="{left}" y1="{y}" x2="{width - 20}" y2="{y}" stroke="#d5d8dc"/>')  # fmt: skip
    for e in events:
        lane = lanes.index(e["source"]) if e["source"] in lanes else 0
        x = left + (width - left - 30) * ((e["at_ms"] - t0) / span if t1 > t0 else 0.5)
        y = 10 + lane * lane_h + lane_h / 2
        r = 7 if e["severity"] == "critical" else 5
        parts.append(f'<circle cx="{x:.1f}" cy="{y}" r="{r}" fill="{SEVERITY_COLOR.get(e["severity"], "#7f8c8d")}" '
                     f'fill-opacity="0.85"><title>{escape(e["at"])} {escape(e["kind"])}: {escape(e["text"])}</title>'
                     "</circle>")  # fmt: skip
    parts.append(f'<text x="{left}" y="{height - 2}" font-size="10">{escape(_time(t0))}</text>')
    parts.append(f'<text x="{width - 20}" y="{height - 2}" font-size="10" text-anchor="end">{escape(_time(t1))}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------------------------ page


def _cards(data: Mapping[str, Any]) -> str:
    latest = data.get("latest_run")
    alerts = data.get("alerts", {})
    cards = []
    if latest:
        score = latest["score"]
        cards.append(("Durability (latest scrub)", score["display"], nines_color(score)))
        cards.append(("Records audited", f"{score['audited']:,}", "#1b2631"))
        lost = score["audited"] - score["durable"]
        cards.append(("Not durable", f"{lost:,}", "#c0392b" if lost else "#1e8449"))
        cards.append(("Unledgered (coverage gap)", f"{latest['counts'].get('unledgered', 0):,}", "#1b2631"))
    cards.append(
        ("Critical alerts", str(alerts.get("critical", 0)), "#c0392b" if alerts.get("critical") else "#1e8449")
    )
    cards.append(("Warnings", str(alerts.get("warning", 0)), "#e67e22" if alerts.get("warning") else "#1e8449"))
    items = "".join(
        f'<div class="card"><div class="v" style="color:{c}">{escape(v)}</div>'
        f'<div class="l">{escape(label)}</div></div>'
        for label, v, c in cards
    )
    return f'<div class="cards">{items}</div>'


STATUS_COLUMNS = ("ok", "expired-justified", "missing", "altered", "diverged", "expired-unjustified", "unledgered")


def _partition_table(partitions: Sequence[Mapping[str, Any]]) -> str:
    if not partitions:
        return '<p class="sub">No partitions audited yet.</p>'
    head = "".join(f"<th>{escape(c)}</th>" for c in STATUS_COLUMNS)
    rows = []
    for p in partitions:
        counts = p.get("counts", {})
        cells = "".join(
            f'<td class="{"bad" if counts.get(c) and c not in ("ok", "expired-justified", "unledgered") else ""}">'
            f"{counts.get(c, 0):,}</td>"
            for c in STATUS_COLUMNS
        )
        rows.append(
            f'<tr><td class="l">{escape(p["topic"])}</td><td>{p["partition"]}</td><td>{p.get("log_start")}</td>'
            f'<td>{p.get("log_end")}</td>{cells}<td class="l">{escape(p["score"]["display"])}</td></tr>'
        )
    return (
        '<table><tr><th class="l">topic</th><th>partition</th><th>log start</th><th>log end</th>'
        f'{head}<th class="l">score</th></tr>{"".join(rows)}</table>'
    )


def _events_table(events: Sequence[Mapping[str, Any]], limit: int = 100) -> str:
    if not events:
        return ""
    rows = []
    for e in list(events)[-limit:][::-1]:
        where = (
            ""
            if not e.get("topic")
            else f"{e['topic']}" + ("" if e.get("partition") is None else f"[{e['partition']}]")
        )
        color = SEVERITY_COLOR.get(e["severity"], "#7f8c8d")
        rows.append(
            f'<tr><td class="l">{escape(e["at"])}</td><td class="l" style="color:{color}">{escape(e["severity"])}</td>'
            f'<td class="l">{escape(e["source"])}</td><td class="l">{escape(e["kind"])}</td>'
            f'<td class="l">{escape(where)}</td><td class="l">{escape(e["text"])}</td></tr>'
        )
    return (
        '<table><tr><th class="l">time (UTC)</th><th class="l">severity</th><th class="l">source</th>'
        f'<th class="l">kind</th><th class="l">where</th><th class="l">what</th></tr>{"".join(rows)}</table>'
    )


def _examples_table(examples: Sequence[Mapping[str, Any]]) -> str:
    if not examples:
        return ""
    rows = "".join(
        f'<tr><td class="l">{escape(str(e.get("topic")))}</td><td>{e.get("partition")}</td><td>{e.get("offset")}</td>'
        f'<td class="l bad">{escape(str(e.get("status")))}</td>'
        f'<td class="l">{escape(str(e.get("reason") or ""))}</td></tr>'
        for e in examples
    )
    return (
        "<h2>Findings (first records that are not durable)</h2>"
        '<table><tr><th class="l">topic</th><th>partition</th><th>offset</th><th class="l">status</th>'
        f'<th class="l">reason</th></tr>{rows}</table>'
    )


def render_html(data: Mapping[str, Any]) -> str:
    latest = data.get("latest_run")
    subtitle = (
        f"latest scrub {latest['run_id']} at {latest['started_at']}, span {latest['span']}"
        if latest
        else "no scrub yet"
    )
    body = [
        "<h1>strongroom durability audit</h1>",
        f'<div class="sub">ledger {escape(str(data.get("ledger")))} · {escape(subtitle)} · '
        f"generated {escape(str(data.get('generated_at')))}</div>",
        _cards(data),
        "<h2>Durability per topic per span (nines)</h2>",
        heatmap(data.get("topics", [])),
        "<h2>Durability per topic</h2>",
        nines_bars(data.get("topics", [])),
        "<h2>Score history</h2>",
        history_chart(data.get("history", [])),
        "<h2>Incident timeline</h2>",
        timeline_chart(data.get("timeline", [])),
        _events_table(data.get("timeline", [])),
        _examples_table(data.get("examples", [])),
        "<h2>Partitions (latest scrub)</h2>",
        _partition_table(data.get("partitions", [])),
        '<p class="sub">Durable = ok + expired-justified; score = durable / audited; nines = -log10(lost/audited). '
        "A perfect score over N records demonstrates at most log10(N) nines. Unledgered records are not audited."
        "</p>",
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>strongroom durability audit</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>"
    )
