"""``erasure status`` decisions from a partition scan and the readers registry (no Kafka)."""

from __future__ import annotations

from strongroom.keys.readers import ReaderHeartbeat
from strongroom.keys.records import ErasureMarker
from strongroom.keys.topic_config import erasure_deadline_ms, roll_deadline_ms
from strongroom.keys.verification import KeyRecordSeen, PartitionScan, SubjectScan, evaluate

NOW = 1_800_000_000_000
CONFIG = {"segment.ms": "1000", "max.compaction.lag.ms": "2000"}


def scan(seen: SubjectScan | None = None) -> PartitionScan:
    result = PartitionScan(partition=2, log_start=0, log_end=100, records=50, last_timestamp_ms=NOW - 10_000)
    if seen is not None:
        result.subjects["alice"] = seen
    return result


def erased(**keys: KeyRecordSeen) -> SubjectScan:
    seen = SubjectScan(marker_offset=40, marker=ErasureMarker("alice", "req-1", "dpo", "art. 17", NOW - 5000))
    seen.keys = {name.encode().ljust(16, b"\0"): record for name, record in keys.items()}
    return seen


def reader(
    reader_id: str, applied: int, *, persistent: bool = False, closed: bool = False, age_ms: int = 0
) -> ReaderHeartbeat:
    return ReaderHeartbeat(
        reader_id=reader_id, keys_topic="keys", host="h1", pid=1, persistent=persistent, store=f"/s/{reader_id}",
        started_ms=NOW - 60_000, last_seen_ms=NOW - age_ms, interval_ms=1000, applied={2: applied}, closed=closed,
    )  # fmt: skip


def test_never_erased() -> None:
    status = evaluate("alice", scan(), {}, CONFIG, NOW)
    assert status.status == "not-erased"


def test_verified_when_no_key_record_below_the_marker_and_every_reader_applied_it() -> None:
    status = evaluate("alice", scan(erased()), {"r1": reader("r1", 41)}, CONFIG, NOW)
    assert status.status == "verified"
    assert status.evidence["readers_applied"] == ["r1"]
    assert status.evidence["scanned_from_offset"] == 0
    assert status.request is not None
    assert status.request["request_id"] == "req-1"


def test_pending_while_compaction_has_not_removed_tombstoned_records() -> None:
    seen = erased(k1=KeyRecordSeen(offset=10, timestamp_ms=NOW - 9000, tombstoned_at=NOW - 4000))
    status = evaluate("alice", scan(seen), {}, CONFIG, NOW)
    assert status.status == "pending"
    assert "waiting for compaction" in status.reasons[0]


def test_pending_when_the_eraser_did_not_finish() -> None:
    seen = erased(k1=KeyRecordSeen(offset=10, timestamp_ms=NOW - 9000))
    status = evaluate("alice", scan(seen), {}, CONFIG, NOW)
    assert status.status == "pending"
    assert "run `strongroom erase alice" in status.reasons[0]


def test_keys_after_the_marker_are_a_new_generation_not_a_failure() -> None:
    seen = erased(k2=KeyRecordSeen(offset=60, timestamp_ms=NOW))
    status = evaluate("alice", scan(seen), {}, CONFIG, NOW)
    assert status.status == "verified"
    assert "new generation" in status.warnings[0]


def test_a_live_reader_that_has_not_applied_the_marker_keeps_it_pending() -> None:
    status = evaluate("alice", scan(erased()), {"r1": reader("r1", 40)}, CONFIG, NOW)
    assert status.status == "pending"
    assert "reader r1" in status.reasons[0]


def test_a_stopped_reader_with_a_persistent_store_keeps_it_pending_and_says_how_to_forget_it() -> None:
    heartbeat = reader("r9", 12, persistent=True, age_ms=3_600_000)
    status = evaluate("alice", scan(erased()), {"r9": heartbeat}, CONFIG, NOW)
    assert status.status == "pending"
    assert "persistent store (/s/r9)" in status.reasons[0]
    assert "--forget r9" in status.reasons[0]
    closed = reader("r9", 12, persistent=True, closed=True)
    assert evaluate("alice", scan(erased()), {"r9": closed}, CONFIG, NOW).status == "pending"


def test_readers_holding_nothing_do_not_block() -> None:
    readers = {
        "closed": reader("closed", 3, closed=True),
        "crashed": reader("crashed", 3, age_ms=3_600_000),
    }
    status = evaluate("alice", scan(erased()), readers, CONFIG, NOW)
    assert status.status == "verified"
    assert status.evidence["readers_holding_nothing"] == ["closed", "crashed"]
    assert "stopped without closing" in status.warnings[0]


def test_deadline_formula_from_the_topic_configs() -> None:
    assert roll_deadline_ms({"segment.ms": "3600000", "max.compaction.lag.ms": "21600000"}) == 3_600_000
    assert erasure_deadline_ms({"segment.ms": "3600000", "max.compaction.lag.ms": "21600000"}) == 21_600_000 + 15_000
    assert erasure_deadline_ms({"segment.ms": "9000", "max.compaction.lag.ms": "2000"}, cleaner_backoff_ms=1000) == 3000


def test_every_status_says_what_it_verifies_and_what_it_cannot() -> None:
    for status in (evaluate("alice", scan(erased()), {}, CONFIG, NOW), evaluate("bob", scan(), {}, CONFIG, NOW)):
        data = status.to_dict()
        assert any("no non-tombstone key record" in item for item in data["verifies"])
        assert any("executors" in item for item in data["verifies"])
        assert any("outside the subject's partition" in item and "misplaced" in item for item in data["cannot_verify"])
        assert any("follower replicas" in item for item in data["cannot_verify"])


def test_pending_within_the_compaction_deadline_is_not_overdue_and_past_it_is() -> None:
    tombstoned = NOW - 4000
    seen = erased(k1=KeyRecordSeen(offset=10, timestamp_ms=NOW - 9000, tombstoned_at=tombstoned))
    deadline = tombstoned + erasure_deadline_ms(CONFIG)
    on_time = evaluate("alice", scan(seen), {}, CONFIG, deadline)
    assert (on_time.status, on_time.overdue) == ("pending", False)
    assert on_time.compaction_deadline is not None
    late = evaluate("alice", scan(seen), {}, CONFIG, deadline + 61_000)
    assert (late.status, late.overdue) == ("pending", True)
    assert late.reasons[0].endswith("61s overdue")
    assert late.to_dict()["overdue"] is True


def test_an_unfinished_eraser_or_a_lagging_reader_is_pending_but_never_overdue() -> None:
    unfinished = evaluate("alice", scan(erased(k1=KeyRecordSeen(offset=10, timestamp_ms=NOW - 9000))), {}, CONFIG,
                          NOW + 10**9)  # fmt: skip
    assert (unfinished.status, unfinished.overdue, unfinished.compaction_deadline) == ("pending", False, None)
    lagging = evaluate("alice", scan(erased()), {"r1": reader("r1", 40)}, CONFIG, NOW)
    assert (lagging.status, lagging.overdue) == ("pending", False)
