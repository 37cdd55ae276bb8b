"""The watcher's decisions (pure), against a ledger written in the capture's layout with pyarrow."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strongroom.audit.hashing import hash_bytes
from strongroom.audit.kafka_state import PartitionState
from strongroom.audit.ledger_view import LedgerView
from strongroom.audit.oplog import DELETE_RECORDS, TOPIC_DELETION, Operation, PartitionChange
from strongroom.audit.schema import ARROW_SCHEMA
from strongroom.audit.store import LedgerPaths
from strongroom.audit.watch import Evidence, Observation, evaluate

NOW = 1_800_000_000_000
HOUR = 3_600_000


def part(p: int = 0, *, start: int = 0, hw: int = 100, leader: int = 1, epoch: int = 0,
         isr: tuple[int, ...] = (1, 2, 3), topic: str = "t") -> PartitionState:  # fmt: skip
    return PartitionState(topic, p, start, hw, hw, leader, epoch, isr, (1, 2, 3), NOW)


def obs(*parts: PartitionState, config: Mapping[str, str] | None = None) -> Observation:
    cfg = {"cleanup.policy": "delete", "retention.ms": str(HOUR), "retention.bytes": "-1",
           "min.insync.replicas": "2", "unclean.leader.election.enable": "false"}  # fmt: skip
    cfg.update(config or {})
    topics = {p.topic for p in parts}
    return Observation(NOW, {(p.topic, p.partition): p for p in parts}, {t: dict(cfg) for t in topics})


def write_ledger(root: Path, topic: str, partition: int, rows: Sequence[tuple[int, int, int, bytes]],
                 ranges: Sequence[tuple[int, int]]) -> LedgerPaths:  # fmt: skip
    """rows: (offset, epoch, timestamp, value)."""
    records = root / "records" / f"topic={topic}" / "kind=record"
    markers = root / "records" / f"topic={topic}" / "kind=range"
    records.mkdir(parents=True, exist_ok=True)
    markers.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([f for f in ARROW_SCHEMA if f.name not in ("topic", "kind")])
    recs = [{"partition": partition, "offset": o, "leader_epoch": e, "timestamp": ts, "timestamp_type": 1,
             "key_hash": hash_bytes(b"k"), "value_hash": hash_bytes(v), "key_len": 1, "value_len": len(v),
             "read_at": ts + 10} for o, e, ts, v in rows]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), records / "part-0.parquet")
    marks = [{"partition": partition, "offset": s, "range_end": e, "read_at": NOW} for s, e in ranges]
    pq.write_table(pa.Table.from_pylist(marks, schema=schema), markers / "part-0.parquet")
    # what Spark's file sink commits: a metadata log naming the files of each batch
    log_dir = root / "records" / "_spark_metadata"
    log_dir.mkdir(exist_ok=True)
    entries = [{"path": (d / "part-0.parquet").as_uri(), "size": 1, "isDir": False, "modificationTime": 0,
                "blockReplication": 1, "blockSize": 1, "action": "add"} for d in (records, markers)]  # fmt: skip
    (log_dir / "0").write_text("v1\n" + "\n".join(json.dumps(e) for e in entries))
    # a file being written by a batch that has not committed: must be ignored
    (records / "part-1-uncommitted.parquet").write_bytes(b"PAR1 half written")
    return LedgerPaths(str(root))


def kinds(alerts: Sequence[Any]) -> list[tuple[str, str]]:
    return [(a.kind, a.severity) for a in alerts]


def test_first_observation_raises_nothing() -> None:
    assert evaluate(None, obs(part()), Evidence(now_ms=NOW)) == []


def test_unchanged_cluster_raises_nothing() -> None:
    assert evaluate(obs(part()), obs(part()), Evidence(now_ms=NOW)) == []


def test_recorded_delete_records_justifies_the_advance() -> None:
    op = Operation(kind=DELETE_RECORDS, topic="t", reason="ticket 1", partitions=(PartitionChange(0, 0, 40),))
    alerts = evaluate(obs(part()), obs(part(start=40)), Evidence(operations=[op], now_ms=NOW))
    assert kinds(alerts) == [("lso-advance-justified", "info")]
    assert alerts[0].evidence["operation"] == op.id


def test_a_recorded_deletion_below_the_new_start_does_not_justify_it() -> None:
    op = Operation(kind=DELETE_RECORDS, topic="t", reason="ticket 1", partitions=(PartitionChange(0, 0, 10),))
    alerts = evaluate(obs(part()), obs(part(start=40)), Evidence(operations=[op], now_ms=NOW))
    assert kinds(alerts) == [("lso-advance-unverified", "warning")]


def test_unlimited_retention_advance_without_record_is_critical_even_without_a_ledger() -> None:
    cfg = {"retention.ms": "-1"}
    alerts = evaluate(obs(part(), config=cfg), obs(part(start=5), config=cfg), Evidence(now_ms=NOW))
    assert kinds(alerts) == [("lso-advance-unjustified", "critical")]


def test_ledger_timestamps_decide_retention(tmp_path: Path) -> None:
    old, young = NOW - 2 * HOUR, NOW - 60_000
    rows = [(o, 0, old if o < 50 else young, b"v") for o in range(100)]
    view = LedgerView(write_ledger(tmp_path, "t", 0, rows, [(0, 100)]))
    ev = Evidence(ledger=view, now_ms=NOW)
    assert kinds(evaluate(obs(part()), obs(part(start=50)), ev)) == [("lso-advance-justified", "info")]
    alerts = evaluate(obs(part(start=50)), obs(part(start=60)), ev)
    assert kinds(alerts) == [("lso-advance-unjustified", "critical")]
    assert alerts[0].evidence["max_timestamp"] == young


def test_a_topic_the_ledger_has_no_committed_files_for_reads_as_empty(tmp_path: Path) -> None:
    view = LedgerView(write_ledger(tmp_path, "t", 0, [(0, 0, NOW, b"v")], [(0, 1)]))
    assert view.coverage("t", 0) == [(0, 1)]
    assert view.coverage("other", 0) == []  # no file for it: no columns to filter on, and no error
    assert view.last_offset("other", 0) is None
    assert view.epoch_chain("other", 0) == []


def test_retention_with_unseen_records_is_only_unverified(tmp_path: Path) -> None:
    rows = [(o, 0, NOW - 2 * HOUR, b"v") for o in range(20, 100)]
    view = LedgerView(write_ledger(tmp_path, "t", 0, rows, [(20, 100)]))
    alerts = evaluate(obs(part()), obs(part(start=50)), Evidence(ledger=view, now_ms=NOW))
    assert kinds(alerts) == [("lso-advance-unverified", "warning")]
    assert alerts[0].evidence["unseen_ranges"] == [(0, 20)]


def test_retention_bytes_justifies_when_the_log_still_holds_enough(tmp_path: Path) -> None:
    rows = [(o, 0, NOW - 60_000, b"x" * 100) for o in range(100)]
    view = LedgerView(write_ledger(tmp_path, "t", 0, rows, [(0, 100)]))
    cfg = {"retention.ms": "-1", "retention.bytes": "5000"}
    ev = Evidence(ledger=view, now_ms=NOW)
    assert kinds(evaluate(obs(part(), config=cfg), obs(part(start=40), config=cfg), ev)) == [
        ("lso-advance-justified", "info")
    ]
    big = {"retention.ms": "-1", "retention.bytes": "100000"}
    assert kinds(evaluate(obs(part(), config=big), obs(part(start=40), config=big), ev)) == [
        ("lso-advance-unjustified", "critical")
    ]


def test_clean_failover_is_an_info_event() -> None:
    alerts = evaluate(obs(part()), obs(part(leader=2, epoch=1, isr=(2, 3))), Evidence(now_ms=NOW))
    assert kinds(alerts) == [("leader-change", "info")]


def test_leader_outside_previous_isr_with_lost_records_is_a_critical_unclean_election() -> None:
    before = part(leader=1, isr=(1,), hw=100)
    after = part(leader=2, epoch=1, isr=(2,), hw=90)
    alerts = kinds(evaluate(obs(before), obs(after), Evidence(now_ms=NOW)))
    assert ("unclean-election", "critical") in alerts
    assert ("truncation", "critical") in alerts


def test_leader_outside_previous_isr_on_a_topic_allowing_unclean_elections_is_a_warning() -> None:
    before, after = part(leader=1, isr=(1,)), part(leader=2, epoch=1, isr=(2,), hw=100)
    allowed = {"unclean.leader.election.enable": "true"}
    alerts = evaluate(obs(before, config=allowed), obs(after, config=allowed), Evidence(now_ms=NOW))
    assert kinds(alerts) == [("unclean-election", "warning")]
    assert "no loss found" in alerts[0].message


def test_replica_that_joined_the_isr_between_polls_and_was_elected_is_a_clean_change() -> None:
    # Sampling: broker 2 rejoined the ISR and broker 1 died within one poll interval. Unclean elections
    # are disabled and nothing was truncated: not an alert (the false positive of a clean rolling restart).
    before = part(leader=1, isr=(1, 3))
    after = part(leader=2, epoch=1, isr=(2, 3), hw=120)
    alerts = evaluate(obs(before), obs(after), Evidence(now_ms=NOW))
    assert kinds(alerts) == [("leader-change", "info")]
    assert "joined the ISR after the previous poll" in alerts[0].message


def test_high_watermark_going_back_is_truncation() -> None:
    alerts = evaluate(obs(part(hw=100)), obs(part(hw=90, leader=2, epoch=1)), Evidence(now_ms=NOW))
    assert ("truncation", "critical") in kinds(alerts)


def test_epoch_chain_spot_check_finds_divergence(tmp_path: Path) -> None:
    rows = [(o, 0 if o < 50 else 1, NOW, b"v%d" % o) for o in range(60)]
    view = LedgerView(write_ledger(tmp_path, "t", 0, rows, [(0, 60)]))
    assert view.epoch_chain("t", 0) == [(0, 0), (1, 50)]

    def log_lookup(topic: str, partition: int, offsets: Sequence[int]) -> dict[int, dict[str, Any]]:
        # the log kept epoch 0 and offset 50, but offset 59 now holds other content under epoch 2
        out = {}
        for o in offsets:
            if o == 59:
                out[o] = {"leader_epoch": 2, "key_hash": hash_bytes(b"k"), "value_hash": hash_bytes(b"other"),
                          "headers_hash": None, "timestamp": NOW}  # fmt: skip
            else:
                out[o] = {"leader_epoch": 0 if o < 50 else 1, "key_hash": hash_bytes(b"k"),
                          "value_hash": hash_bytes(b"v%d" % o), "headers_hash": None, "timestamp": NOW}  # fmt: skip
        return out

    ev = Evidence(ledger=view, log_lookup=log_lookup, now_ms=NOW)
    alerts = evaluate(obs(part(epoch=1)), obs(part(epoch=2, leader=2, isr=(2, 3))), ev)
    trunc = [a for a in alerts if a.kind == "truncation"]
    assert len(trunc) == 1
    assert trunc[0].evidence["diverged"] == [
        {"offset": 59, "ledger_epoch": 1, "log_epoch": 2, "state": "different content"}
    ]
    assert ("leader-change", "info") not in kinds(alerts), "a truncating change is not clean"


@pytest.mark.parametrize(
    ("before", "after", "severity"),
    [
        ({"retention.ms": "604800000"}, {"retention.ms": "60000"}, "warning"),
        ({"retention.ms": "-1"}, {"retention.ms": "604800000"}, "warning"),
        ({"retention.bytes": "-1"}, {"retention.bytes": "1000"}, "warning"),
        ({"min.insync.replicas": "2"}, {"min.insync.replicas": "1"}, "warning"),
        ({"unclean.leader.election.enable": "false"}, {"unclean.leader.election.enable": "true"}, "critical"),
        ({"cleanup.policy": "compact"}, {"cleanup.policy": "compact,delete"}, "warning"),
    ],
)
def test_weakening_configs_alert(before: dict[str, str], after: dict[str, str], severity: str) -> None:
    alerts = evaluate(obs(part(), config=before), obs(part(), config=after), Evidence(now_ms=NOW))
    assert kinds(alerts) == [("config-weakened", severity)]


def test_strengthening_configs_are_silent() -> None:
    before = {"retention.ms": "60000", "min.insync.replicas": "1"}
    after = {"retention.ms": "-1", "min.insync.replicas": "2"}
    assert evaluate(obs(part(), config=before), obs(part(), config=after), Evidence(now_ms=NOW)) == []


def test_deleted_topics() -> None:
    prev = obs(part(topic="a"), part(topic="b"))
    cur = obs(part(topic="b"))
    assert kinds(evaluate(prev, cur, Evidence(now_ms=NOW))) == [("topic-deleted", "critical")]
    op = Operation(kind=TOPIC_DELETION, topic="a", reason="decommissioned")
    assert kinds(evaluate(prev, cur, Evidence(operations=[op], now_ms=NOW))) == [("topic-deleted", "info")]


def test_observation_round_trips_through_json() -> None:
    o = obs(part(), part(1, start=3))
    assert Observation.from_json(o.to_json()) == o


def test_committed_files_follow_the_metadata_log(tmp_path: Path) -> None:
    from strongroom.audit.ledger_view import committed_files

    log_dir = tmp_path / "_spark_metadata"
    log_dir.mkdir()

    def entry(name: str, action: str = "add") -> str:
        return json.dumps({"path": (tmp_path / name).as_uri(), "isDir": False, "action": action})

    (log_dir / "8").write_text("v1\n" + entry("old"))
    (log_dir / "9.compact").write_text("v1\n" + entry("a") + "\n" + entry("b"))
    (log_dir / "10").write_text("v1\n" + entry("c") + "\n" + entry("a", "delete"))
    (log_dir / ".10.crc").write_text("x")
    assert committed_files(tmp_path) == [tmp_path / "b", tmp_path / "c"]
    assert committed_files(tmp_path / "nothing") is None


def test_an_unjustified_advance_waits_out_the_grace_period_for_its_record(tmp_path: Path) -> None:
    """``recover apply`` deletes first and records right after: within the grace period a late
    operations-log entry turns the alert into a justified event; past it the alert is raised."""
    from strongroom.audit.alerts import Fanout
    from strongroom.audit.watch import Watcher
    from strongroom.kafka.config import ClientConfig

    class Sink:
        name = "list"

        def __init__(self) -> None:
            self.got: list[Any] = []

        def emit(self, alerts: Sequence[Any]) -> None:
            self.got.extend(alerts)

        def close(self) -> None:
            pass

    cfg = {"retention.ms": "-1"}
    before, after = obs(part(), config=cfg), obs(part(start=40), config=cfg)
    watcher = Watcher(ClientConfig("127.0.0.1:9"), topics=["t"], state_path=tmp_path / "s.json",
                      sink=Fanout([Sink()]), grace=60.0)  # fmt: skip
    watcher.previous, watcher._current, watcher._configs = before, after, after.configs

    first = evaluate(before, after, Evidence(now_ms=NOW))
    assert kinds(first) == [("lso-advance-unjustified", "critical")]
    assert watcher._hold_back(first, Evidence(now_ms=NOW)) == [], "held while the grace period runs"

    late = Operation(kind=DELETE_RECORDS, topic="t", reason="recover apply", partitions=(PartitionChange(0, 0, 40),))
    again = watcher._hold_back([], Evidence(operations=[late], now_ms=NOW))
    assert kinds(again) == [("lso-advance-justified", "info")]

    watcher._hold_back(first, Evidence(now_ms=NOW))
    watcher.grace = 0.0
    assert kinds(watcher._hold_back([], Evidence(now_ms=NOW))) == [("lso-advance-unjustified", "critical")]

    watcher.grace = 60.0
    watcher._hold_back(first, Evidence(now_ms=NOW))
    assert kinds(watcher.flush_pending()) == [("lso-advance-unjustified", "critical")], "never lost on exit"
