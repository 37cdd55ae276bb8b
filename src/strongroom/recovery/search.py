"""Binary search for the lowest offset from which every record of a partition is readable.

The search reads one record per probe ("the first record at offset ≥ m and < hi"), never a range,
so its cost is a count of fetches, not of records: ≤ ⌈log2 n⌉ + 2 probes for a partition of n
offsets. All partitions advance together, one probe each per round, so a topic with many
partitions costs about as many rounds as its largest partition needs.

**What it assumes.** Loss is a *prefix*: once a record is readable, every later one is (one DEK
per KEK and time window, the writer switched KEKs once). Under that assumption it returns L =
1 + offset of the last unreadable record (the log start when nothing is lost). Writers that
switched keys at different moments interleave old and new records near the boundary, and
per-subject keys scatter the loss across the whole partition; the search cannot see either, so
:mod:`strongroom.recovery.verify` checks every record afterwards and corrects L.

Gaps (compaction, transaction markers, aborted records) are no obstacle: a probe returns the first
record at or after its offset, and an empty stretch is simply "no record before hi".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from strongroom.recovery.checker import RecordVerdict

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class ProbedRecord:
    """One record a probe returned: its offset, headers and value (nothing else is needed)."""

    offset: int
    headers: list[Header] | None
    value: bytes | None


class RecordProbe(Protocol):
    """Fetches, per partition, the first record with ``from_offset <= offset < before`` (or None)."""

    def first_records(self, requests: Mapping[int, tuple[int, int]]) -> dict[int, ProbedRecord | None]: ...


#: Decides a probed record; the search moves on ``verdict.lost`` (corrupt or malformed records are
#: unreadable for reasons no KEK can fix, so they do not move the boundary; verification reports them).
Judge = Callable[[ProbedRecord], RecordVerdict]


@dataclass(frozen=True, slots=True)
class ProbeStep:
    """One probe of the search, for the plan's evidence: where it looked, what it found."""

    from_offset: int
    found_offset: int | None
    #: True when the record found does not need a lost key; None when nothing was found.
    readable: bool | None

    def to_list(self) -> list[int | bool | None]:
        return [self.from_offset, self.found_offset, self.readable]


@dataclass
class SearchResult:
    """The boundary of one partition and how it was found."""

    partition: int
    log_start: int
    end: int
    boundary: int
    probes: int
    steps: list[ProbeStep] = field(default_factory=list)
    #: The last unreadable record the search saw (offset, KEKs, reason), if any.
    last_unreadable: tuple[int, list[str], str] | None = None

    @property
    def span(self) -> int:
        return self.end - self.log_start


def probe_budget(span: int) -> int:
    """The promised upper bound on fetches for a partition of ``span`` offsets: 2·⌈log2 n⌉ + 8."""
    return 2 * max(span - 1, 0).bit_length() + 8


@dataclass
class _State:
    partition: int
    log_start: int
    end: int
    lo: int
    hi: int
    first: bool = True
    probes: int = 0
    steps: list[ProbeStep] = field(default_factory=list)
    last_unreadable: tuple[int, list[str], str] | None = None

    @property
    def done(self) -> bool:
        return self.lo >= self.hi

    def next_request(self) -> tuple[int, int]:
        return (self.lo if self.first else (self.lo + self.hi) // 2), self.hi

    def result(self) -> SearchResult:
        return SearchResult(
            self.partition, self.log_start, self.end, self.lo, self.probes, self.steps, self.last_unreadable
        )


def search_boundaries(
    bounds: Mapping[int, tuple[int, int]],
    probe: RecordProbe,
    judge: Judge,
    progress: Callable[[int, int, int], None] | None = None,
) -> dict[int, SearchResult]:
    """Boundary L per partition; ``bounds`` maps partition → (log start, end offset).

    ``judge`` decides whether a probed record is readable (it may raise to abort the scan).
    ``progress(round, partitions still searching, total partitions)`` is called once per round.
    """
    states = {p: _State(p, start, end, start, max(start, end)) for p, (start, end) in bounds.items()}
    rounds = 0
    while True:
        active = [s for s in states.values() if not s.done]
        if progress is not None:
            progress(rounds, len(active), len(states))
        if not active:
            break
        rounds += 1
        requests = {s.partition: s.next_request() for s in active}
        found = probe.first_records(requests)
        for state in active:
            from_offset, before = requests[state.partition]
            record = found.get(state.partition)
            state.probes += 1
            if record is None or not from_offset <= record.offset < before:
                # Nothing in [from_offset, hi): every record there is "readable" vacuously.
                state.steps.append(ProbeStep(from_offset, None, None))
                state.hi = from_offset
            else:
                verdict = judge(record)
                state.steps.append(ProbeStep(from_offset, record.offset, not verdict.lost))
                if not verdict.lost:
                    # Prefix assumption: everything from here on is readable.
                    state.hi = from_offset
                else:
                    state.lo = record.offset + 1
                    state.last_unreadable = (record.offset, verdict.keks, verdict.reason())
            state.first = False
    return {p: s.result() for p, s in states.items()}
