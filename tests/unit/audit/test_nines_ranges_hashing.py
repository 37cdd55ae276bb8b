"""Pure pieces of the audit: nines, offset ranges, hashes, durations."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strongroom.audit.errors import InvalidDuration
from strongroom.audit.hashing import hash_bytes, hash_headers, record_hashes
from strongroom.audit.nines import Score
from strongroom.audit.ranges import OffsetRange, gaps, merge_ranges, plan_ranges, split_range
from strongroom.audit.units import format_duration_ms, parse_duration_ms


@pytest.mark.parametrize(
    ("durable", "audited", "display", "percent"),
    [
        (1_000_000 - 1, 1_000_000, "6 nines", "99.9999%"),
        (10**9 - 1, 10**9, "9 nines", "99.9999999%"),
        (9_995, 10_000, "3.3 nines", "99.95%"),
        (1, 2, "0.3 nines", "50.0%"),
        (0, 5, "0 nines", "0.0%"),
        (100, 100, "perfect", "100%"),
        (0, 0, "n/a", "n/a"),
    ],
)
def test_nines_are_exact_for_round_losses(durable: int, audited: int, display: str, percent: str) -> None:
    score = Score(durable, audited)
    assert score.display == display
    assert score.percent() == percent


def test_a_perfect_score_only_demonstrates_what_it_saw() -> None:
    assert Score(100, 100).demonstrable_nines == 2.0
    assert Score(100, 100).nines == math.inf
    assert Score(100, 100).to_json()["nines"] is None
    assert Score(0, 0).demonstrable_nines is None
    assert Score(0, 0).ratio is None


def test_invalid_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid score"):
        Score(3, 2)


@given(st.integers(1, 10**12), st.integers(0, 10**12))
def test_percent_never_rounds_a_loss_up_to_100(audited: int, lost: int) -> None:
    lost = min(lost, audited)
    score = Score(audited - lost, audited)
    if lost:
        assert score.percent() != "100%"
        assert not score.perfect
        assert score.nines is not None
        assert score.nines <= score.demonstrable_nines + 1e-9  # type: ignore[operator]


def test_split_and_plan_ranges() -> None:
    assert split_range(OffsetRange("t", 0, 10, 25), 10) == [
        OffsetRange("t", 0, 10, 20),
        OffsetRange("t", 0, 20, 25),
    ]
    assert split_range(OffsetRange("t", 0, 5, 5), 10) == []
    planned = plan_ranges([OffsetRange("t", 0, 0, 100)], max_records=1000, min_pieces=4)
    assert len(planned) == 4
    assert planned[0].start == 0
    assert planned[-1].end == 100


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)), max_size=30))
def test_merge_ranges_is_the_union(raw: list[tuple[int, int]]) -> None:
    ranges = [(s, s + n) for s, n in raw]
    merged = merge_ranges(ranges)
    covered = {o for s, e in ranges for o in range(s, e)}
    assert {o for s, e in merged for o in range(s, e)} == covered
    assert all(a[1] < b[0] for a, b in itertools.pairwise(merged)), "disjoint and not touching"
    for s, e in gaps(merged, 0, 260):
        assert not any(o in covered for o in range(s, e))


def test_gaps() -> None:
    assert gaps([(0, 10), (20, 30)], 5, 25) == [(10, 20)]
    assert gaps([], 3, 7) == [(3, 7)]
    assert gaps([(0, 100)], 10, 20) == []


def test_hashes_distinguish_null_from_empty_and_header_order() -> None:
    assert hash_bytes(None) is None
    assert hash_bytes(b"") is not None
    assert len(hash_bytes(b"x") or b"") == 16
    assert hash_headers(None) is None
    assert hash_headers([]) is None
    assert hash_headers([("a", b"1"), ("b", b"2")]) != hash_headers([("b", b"2"), ("a", b"1")])
    assert hash_headers([("a", None)]) != hash_headers([("a", b"")])
    assert hash_headers([("ab", b"c")]) != hash_headers([("a", b"bc")]), "lengths are framed"
    assert record_hashes(b"k", b"v", None)[2] is None


def test_durations() -> None:
    assert parse_duration_ms("90s") == 90_000
    assert parse_duration_ms("1h") == 3_600_000
    assert parse_duration_ms("500ms") == 500
    assert parse_duration_ms("2") == 2_000
    assert format_duration_ms(3_600_000) == "1h"
    assert format_duration_ms(90_000) == "90s"
    for bad in ("", "abc", "0s", "-1h", "5 parsecs"):
        with pytest.raises(InvalidDuration):
            parse_duration_ms(bad)
