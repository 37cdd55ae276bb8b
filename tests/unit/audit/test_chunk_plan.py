"""The digest verdicts per chunk (pure Python over collected digest rows)."""

from __future__ import annotations

from typing import Any

from strongroom.audit.digest import plan_chunks


def digest(topic: str, p: int, chunk: int, records: int, x: int, *, span: int | None = None, lo: int = 0,
           hi: int = 0) -> dict[str, Any]:  # fmt: skip
    return {"topic": topic, "partition": p, "chunk": chunk, "records": records, "digest_xor": x, "digest_lo": x,
            "digest_hi": 1, "min_offset": lo, "max_offset": hi, "span_start": span}  # fmt: skip


def test_chunks_are_matched_unledgered_or_suspect() -> None:
    ledger = [
        digest("t", 0, 0, 60, 5, span=0, lo=0, hi=59),
        digest("t", 0, 0, 40, 6, span=3600, lo=60, hi=99),  # one chunk over two spans
        digest("t", 0, 1, 100, 7, lo=100, hi=199),  # differs from the log -> suspect
        digest("t", 0, 9, 100, 9, lo=900, hi=999),  # log has nothing there -> suspect (expired/missing)
    ]
    log = [
        digest("t", 0, 0, 70, 5 ^ 6),  # the chunk read in two ranges: rows combine
        digest("t", 0, 0, 30, 0),
        digest("t", 0, 1, 100, 8),
        digest("t", 0, 5, 100, 1, lo=500, hi=599),  # never covered by the ledger -> unledgered, no re-read
        digest("t", 0, 6, 100, 1, lo=600, hi=699),  # covered by the ledger's reads but no rows -> suspect
    ]
    coverage = {("t", 0): [(0, 200), (650, 660), (900, 1000)]}
    # the ledger-side digests of chunk 0 combine the same way
    ledger[0]["digest_lo"], ledger[1]["digest_lo"] = 5, 6
    log[0]["digest_lo"], log[1]["digest_lo"] = 11, 0
    log[0]["digest_hi"], log[1]["digest_hi"] = 1, 1
    plan = plan_chunks(ledger, log, coverage, 100)
    assert list(plan.matched) == [("t", 0, 0)]
    assert plan.ok_by_span == {("t", 0, 0): 60, ("t", 0, 3600): 40}
    assert plan.ok_ranges == {("t", 0): (0, 99)}
    assert plan.unledgered == {("t", 0): [(100, 500, 599)]}
    assert plan.suspect == [("t", 0, 1), ("t", 0, 6), ("t", 0, 9)]

    plan.demote([("t", 0, 0), ("t", 0, 5), ("t", 0, 1)])
    assert plan.matched == {}
    assert plan.unledgered == {}
    assert plan.suspect == [("t", 0, 1), ("t", 0, 6), ("t", 0, 9), ("t", 0, 0), ("t", 0, 5)]
