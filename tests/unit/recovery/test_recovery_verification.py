"""``recover scan``'s Spark verification rows, typed: per-partition counts, lost keys, pass 2's runs."""

from __future__ import annotations

from strongroom.recovery.dependency import KeyDependency, KeyStatus, KeyVerdict
from strongroom.recovery.search import SearchResult
from strongroom.recovery.spark_jobs import PrefixGroup, StatusRuns
from strongroom.recovery.verification import (
    LostKeys,
    PartitionVerification,
    group_status,
    lost_keys,
    summarise_groups,
)

SUBJECT_1, SUBJECT_2, DECLARED = b"S1" * 8, b"S2" * 8, b"S3" * 8


def dependency(kek: str, subject_key: bytes | None = None) -> KeyDependency:
    return KeyDependency(kek, kek.split(":")[1], "vault", "v1", None, subject_key)


VERDICTS = {
    b"ok": KeyVerdict(KeyStatus.READABLE, dependency("vault:k1")),
    b"gone": KeyVerdict(KeyStatus.LOST, dependency("vault:k2")),
    b"s1": KeyVerdict(KeyStatus.LOST, dependency("vault:k2", SUBJECT_1)),
    b"s2": KeyVerdict(KeyStatus.LOST, dependency("vault:k3", SUBJECT_2)),
    b"bad": KeyVerdict(KeyStatus.CORRUPT, None),
    b"declared": KeyVerdict(KeyStatus.DECLARED_LOST, dependency("vault:k4", DECLARED)),
}
GROUPS = [
    PrefixGroup(0, "encrypted", (b"gone",), 50, 0, 49),
    PrefixGroup(0, "encrypted", (b"ok",), 40, 50, 99),
    PrefixGroup(0, "plain", (), 3, 100, 102),
    PrefixGroup(0, "tombstone", (), 1, 103, 103),
    PrefixGroup(1, "encrypted", (b"s1", b"ok"), 10, 5, 30),
    PrefixGroup(1, "malformed", (), 2, 41, 42),
    PrefixGroup(1, "encrypted", (b"bad",), 3, 50, 60),
    PrefixGroup(2, "encrypted", (b"s1", b"s2"), 4, 9, 12),
    PrefixGroup(2, "encrypted", (b"declared", b"declared"), 6, 1, 3),
]
STATUSES = {g.prefixes: group_status(g, VERDICTS) for g in GROUPS if g.kind == "encrypted"}


def test_a_group_takes_the_worst_status_of_its_prefixes() -> None:
    assert STATUSES[(b"s1", b"ok")] == "lost"
    assert STATUSES[(b"bad",)] == "corrupt"
    assert STATUSES[(b"declared", b"declared")] == "readable"  # skipped on purpose: not a loss


def test_pass_one_groups_are_counted_per_partition() -> None:
    found = summarise_groups(GROUPS, STATUSES, VERDICTS)
    assert found[0] == PartitionVerification(
        records=94, readable=44, lost=50, corrupt=0, malformed=0, plain=3, tombstones=1,
        first_lost=0, last_lost=49, lost_subject_key_records=0, unreadable_other=(),
    )  # fmt: skip
    partition_1 = found[1]
    assert (partition_1.lost, partition_1.lost_subject_key_records, partition_1.last_lost) == (10, 10, 30)
    assert (partition_1.corrupt, partition_1.malformed) == (3, 2)
    assert partition_1.unreadable_other == ((41, 42, 2), (50, 60, 3))
    assert found[2].lost_subject_key_records == 4


def test_pass_two_runs_add_the_order_below_the_boundary() -> None:
    verified = summarise_groups(GROUPS, STATUSES, VERDICTS)[0]
    runs = {
        "lost": StatusRuns(runs=2, records=50, above_searched=3, ranges=((0, 20, 21), (22, 49, 28)),
                           straggler_offsets=(47, 48, 49)),
        "readable": StatusRuns(runs=1, records=4, above_searched=0, ranges=((21, 21, 1),), straggler_offsets=()),
    }  # fmt: skip
    ordered = verified.with_runs(runs)
    assert (ordered.stragglers, ordered.straggler_offsets, ordered.readable_below) == (3, (47, 48, 49), 4)
    assert (ordered.lost_runs, ordered.lost_ranges) == (2, ((0, 20, 21), (22, 49, 28)))
    assert ordered.records == verified.records
    nothing = verified.with_runs({})
    assert (nothing.stragglers, nothing.readable_below, nothing.lost_runs, nothing.lost_ranges) == (0, 0, 0, ())


def test_lost_keys_count_records_per_kek_and_per_subject_key_once() -> None:
    lost = lost_keys(GROUPS, STATUSES, VERDICTS)
    assert lost.by_kek == ((0, "vault:k2@v1", 50), (1, "vault:k2@v1", 10), (2, "vault:k2@v1", 4), (2, "vault:k3@v1", 4))
    assert lost.subject_keys == 2
    first = lost.subject_examples()[0]
    assert (first.key_id, first.records, first.first, first.last, first.partitions) == (SUBJECT_1, 14, 5, 30, (1, 2))
    assert lost.declared_lost == {DECLARED: 6}  # six records, however many fields name the key
    assert LostKeys().subject_examples() == []


def test_the_plan_entry_of_a_verified_partition_is_written_from_the_typed_rows() -> None:
    from strongroom.recovery.scan import ScanOptions, _partition_entry

    verified = summarise_groups(GROUPS, STATUSES, VERDICTS)[1]
    entry = _partition_entry(SearchResult(1, 0, 200, 30, 9), verified, [], ScanOptions("orders"))
    assert (entry["boundary"], entry["lost"], entry["shape"]) == (31, 10, "scattered")
    assert entry["unreadable_other"] == [[41, 42, 2], [50, 60, 3]]
    assert entry["lost_ranges"] == {"runs": 0, "ranges": []}
