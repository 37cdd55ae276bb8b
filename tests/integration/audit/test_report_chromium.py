"""The report renders in headless Chromium (no network): a screenshot of the right size, not blank."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from strongroom.audit.alerts import Alert, FileSink
from strongroom.audit.report import collect, write_report
from strongroom.audit.store import LedgerPaths

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1280, 1600


def decode_png(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and raw RGB(A) rows of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = chunk
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0)
    assert color in (2, 6)
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def _summary() -> dict[str, object]:
    def score(durable: int, audited: int, nines: float | None) -> dict[str, object]:
        display = "perfect" if durable == audited else f"{nines} nines"
        return {"durable": durable, "audited": audited, "perfect": durable == audited, "nines": nines,
                "demonstrable_nines": 4.0, "display": display}  # fmt: skip

    spans = [
        {"span_start_ms": 1_800_000_000_000 + i * 3_600_000, "span_start": "s", "span_end": "e",
         "score": score(10_000, 10_000, None) if i != 3 else score(9_990, 10_000, 3.0), "counts": {}}
        for i in range(8)
    ]  # fmt: skip
    topic = {"topic": "orders", "counts": {"ok": 79_990, "missing": 10}, "score": score(79_990, 80_000, 3.9),
             "spans": spans, "config": {},
             "partitions": [{"partition": p, "log_start": 0, "log_end": 40_000, "counts": {"ok": 40_000},
                             "score": score(40_000, 40_000, None)} for p in range(2)]}  # fmt: skip
    return {"run_id": "r1", "started_ms": 1_800_000_030_000, "started_at": "2027-01-15T08:00:30+00:00",
            "finished_at": "x", "span": "1h", "span_ms": 3_600_000, "counts": topic["counts"],
            "score": topic["score"], "topics": [topic], "examples": []}  # fmt: skip


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed: run `make system-deps` (apt-get install -y chromium)")
    ledger = LedgerPaths(str(tmp_path / "ledger"))
    summaries = ledger.local(ledger.scrub_summaries)
    summaries.mkdir(parents=True)
    (summaries / "r1.json").write_text(json.dumps(_summary()))
    FileSink(ledger.local(ledger.alerts) / "alerts.jsonl").emit(
        [
            Alert(
                "lso-advance-unjustified",
                "critical",
                "log start advanced 0 -> 10",
                topic="orders",
                partition=0,
                at_ms=1_800_000_020_000,
            )
        ]
    )
    html_path, _ = write_report(collect(ledger), tmp_path / "out")
    png = Path(os.environ.get("STRONGROOM_REPORT_SCREENSHOT", str(tmp_path / "shot.png")))
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}",
         html_path.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert png.exists(), proc.stderr[-2000:]
    width, height, rows = decode_png(png)
    assert (width, height) == (WIDTH, HEIGHT)
    non_white = sum(1 for row in rows[::4] for i in range(0, len(row) - 2, 12) if row[i : i + 3] != b"\xff\xff\xff")
    sampled = (HEIGHT // 4) * (len(rows[0]) // 12)
    assert non_white > 0.01 * sampled, "the page rendered blank"
    # the green of a perfect span and the red/amber of the bad span are on screen (the heatmap drew)
    greens = sum(1 for row in rows[::2] for i in range(0, len(row) - 2, 6) if row[i : i + 3] == b"\x14\x5a\x32")
    assert greens > 100
