"""The sensitive-operation watcher: poll the cluster, validate every change that can lose data.

Each poll observes, per audited partition, the log start offset, high watermark, leader, ISR and
leader epoch (see :mod:`strongroom.audit.kafka_state`), and each topic's durability configuration.
It compares with the previous observation (kept in a small state file, so a restarted watcher
neither re-alerts nor misses what changed while it was down) and validates:

* **log start offset advanced** - justified by a recorded delete-records in the operations log, by
  ``retention.ms`` (every ledgered record in the deleted range is older than now - retention.ms), or
  by ``retention.bytes`` (the log still holds at least that much). Otherwise critical
  ``lso-advance-unjustified``; when the ledger never saw the deleted range and retention could
  explain it, ``lso-advance-unverified`` (warning) - the watcher never claims more than it saw.
* **leader epoch changed** - a new leader outside the previously observed ISR is an
  ``unclean-election``: critical with truncation evidence, a warning when the topic allows unclean
  elections and no loss is found yet; with unclean elections disabled and no loss it joined the ISR
  between two polls (a clean change, info). A high watermark that went backwards, or a ledgered
  record whose (epoch, content) the log no longer holds (the ledger's epoch chain: first offset of
  each epoch plus the last ledgered offset, spot-read from the log), is a ``truncation`` (critical).
* **configuration weakened** - retention lowered, ``unclean.leader.election.enable`` turned on,
  ``min.insync.replicas`` or the replication factor lowered, compaction turned into deletion.

:func:`evaluate` is the pure decision (observations + evidence in, alerts out); :class:`Watcher` is
the loop with its I/O.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from strongroom.audit import alerts as A
from strongroom.audit.alerts import Alert, Fanout
from strongroom.audit.erasure_deadlines import OverdueErasures
from strongroom.audit.kafka_state import AUDIT_CONFIG_KEYS, ClusterState, PartitionState, TopicState, config_number
from strongroom.audit.ledger_view import LedgerView, RangeEvidence
from strongroom.audit.oplog import OPERATIONS_TOPIC, TOPIC_DELETION, Operation, OperationsLog, deletion_bounds
from strongroom.audit.store import LedgerPaths
from strongroom.kafka.config import ClientConfig
from strongroom.runtime import now_ms

STATE_VERSION = 1
#: Estimated bytes per record beyond key+value when judging retention.bytes (generous on purpose).
RECORD_OVERHEAD_BYTES = 64
#: How many epoch boundaries of the ledger's chain are spot-checked after a leader change.
MAX_CHAIN_CHECKS = 8
#: Seconds a spot read waits for a trailing high watermark before it calls an offset truncated.
SPOT_EOF_GRACE = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observation:
    at_ms: int
    partitions: Mapping[tuple[str, int], PartitionState]
    configs: Mapping[str, Mapping[str, str]]

    @classmethod
    def of(cls, topics: Mapping[str, TopicState], at_ms: int | None = None) -> Observation:
        parts = {(p.topic, p.partition): p for t in topics.values() for p in t.partitions}
        configs = {t: {k: v for k, v in s.config.items() if k in AUDIT_CONFIG_KEYS} for t, s in topics.items()}
        return cls(at_ms or now_ms(), parts, configs)

    def topics(self) -> set[str]:
        return set(self.configs) | {t for t, _ in self.partitions}

    def replication(self, topic: str) -> int:
        return max((len(p.replicas) for (t, _), p in self.partitions.items() if t == topic), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "at_ms": self.at_ms,
            "partitions": [p.to_json() for p in self.partitions.values()],
            "configs": {t: dict(c) for t, c in self.configs.items()},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Observation:
        parts = [PartitionState.from_json(p) for p in d.get("partitions", [])]
        return cls(
            int(d["at_ms"]),
            {(p.topic, p.partition): p for p in parts},
            {t: dict(c) for t, c in (d.get("configs") or {}).items()},
        )


class LogLookup(Protocol):
    """Reads single records of the current log: offset -> (epoch, content hashes) or absent."""

    def __call__(self, topic: str, partition: int, offsets: Sequence[int]) -> Mapping[int, Mapping[str, Any]]: ...


@dataclass
class Evidence:
    """What the watcher can check changes against (all optional: missing evidence is reported as
    'unverified', never as 'fine')."""

    operations: Sequence[Operation] = ()
    ledger: LedgerView | None = None
    log_lookup: LogLookup | None = None
    clock_skew_ms: int = 5_000
    now_ms: int = field(default_factory=now_ms)


def _limit(value: int) -> float:
    """-1 (unlimited) compares as infinity."""
    return float("inf") if value < 0 else float(value)


# ------------------------------------------------------------------------------------ evaluation


def evaluate(prev: Observation | None, cur: Observation, evidence: Evidence) -> list[Alert]:
    """Alerts and events for the change from ``prev`` to ``cur`` (none on the first observation)."""
    if prev is None:
        return []
    out: list[Alert] = []
    bounds = deletion_bounds(evidence.operations)
    for key, now in sorted(cur.partitions.items()):
        before = prev.partitions.get(key)
        if before is None:
            continue
        config = cur.configs.get(now.topic, {})
        out.extend(_log_start(before, now, config, bounds.get(key), evidence))
        out.extend(_leadership(before, now, config, evidence))
    out.extend(_configs(prev, cur))
    out.extend(_deleted_topics(prev, cur, evidence.operations))
    return out


def _about(now: PartitionState, kind: str, severity: str, message: str, evidence: Mapping[str, Any]) -> Alert:
    """An alert about one partition (its name prefixes nothing: ``message`` says it)."""
    return Alert(kind, severity, message, topic=now.topic, partition=now.partition, evidence=dict(evidence))


def _log_start(
    before: PartitionState,
    now: PartitionState,
    config: Mapping[str, str],
    bound: tuple[int, str] | None,
    evidence: Evidence,
) -> list[Alert]:
    """Is a log-start move explained: by a recorded deletion, by retention (with the ledger's evidence)?"""
    if before.log_start < 0 or now.log_start <= before.log_start:
        return []
    old, new = before.log_start, now.log_start
    where = f"log start of {now.topic}[{now.partition}] advanced {old} -> {new}"
    facts: dict[str, Any] = {"from_offset": old, "to_offset": new, "deleted_records_at_most": new - old}
    if bound is not None and bound[0] >= new:
        facts.update({"justification": "operations-log", "operation": bound[1]})
        return [_about(now, A.LSO_ADVANCE_JUSTIFIED, A.INFO, f"{where}: recorded delete-records {bound[1]}", facts)]
    retention_ms, retention_bytes = _retention_facts(config, bound, facts)
    if retention_ms < 0 and retention_bytes < 0:
        message = f"{where} although retention is unlimited and no deletion was recorded"
        return [_about(now, A.LSO_ADVANCE_UNJUSTIFIED, A.CRITICAL, message, facts)]
    ledger = evidence.ledger if evidence.ledger is not None and evidence.ledger.available else None
    ev = ledger.evidence(now.topic, now.partition, old, new) if ledger is not None else None
    if ev is None or not ev.records:
        if ev is not None:
            facts.update(
                {"ledgered_records": ev.records, "unseen_ranges": ev.unseen, "max_timestamp": ev.max_timestamp}
            )
        message = f"{where}; the ledger never saw those records, so retention cannot be confirmed"
        return [_about(now, A.LSO_ADVANCE_UNVERIFIED, A.WARNING, message, facts)]
    facts.update({"ledgered_records": ev.records, "unseen_ranges": ev.unseen, "max_timestamp": ev.max_timestamp})
    why = _retention_explains(now, ev, retention_ms, retention_bytes, evidence, facts)
    if why is None:
        message = (f"{where}: ledgered records are newer than retention.ms={retention_ms} allows and no deletion "
                   "was recorded")  # fmt: skip
        return [_about(now, A.LSO_ADVANCE_UNJUSTIFIED, A.CRITICAL, message, facts)]
    facts["justification"] = why
    if ev.fully_covered:
        return [_about(now, A.LSO_ADVANCE_JUSTIFIED, A.INFO, f"{where}: {why}", facts)]
    message = f"{where}: {why} (part of the range was never ledgered)"
    return [_about(now, A.LSO_ADVANCE_UNVERIFIED, A.WARNING, message, facts)]


def _retention_facts(
    config: Mapping[str, str], bound: tuple[int, str] | None, facts: dict[str, Any]
) -> tuple[int, int]:
    """The topic's effective retention (-1: none), noted in ``facts``."""
    policy = config.get("cleanup.policy", "delete")
    retention_ms = config_number(config, "retention.ms", 604_800_000) if "delete" in policy else -1
    retention_bytes = config_number(config, "retention.bytes", -1) if "delete" in policy else -1
    facts.update({"retention.ms": retention_ms, "retention.bytes": retention_bytes, "cleanup.policy": policy})
    if bound is not None:
        facts["recorded_deletion_up_to"] = bound[0]
    return retention_ms, retention_bytes


def _retention_explains(
    now: PartitionState,
    ev: RangeEvidence,
    retention_ms: int,
    retention_bytes: int,
    evidence: Evidence,
    facts: dict[str, Any],
) -> str | None:
    """``retention.ms`` or ``retention.bytes`` when one of them explains the deleted ledgered records (the
    size estimate is noted in ``facts`` either way)."""
    by_time = (
        retention_ms >= 0
        and ev.max_timestamp is not None
        and ev.max_timestamp <= evidence.now_ms - retention_ms + evidence.clock_skew_ms
    )
    by_size = False
    if retention_bytes >= 0 and evidence.ledger is not None:
        tail = evidence.ledger.evidence(now.topic, now.partition, now.log_start, max(now.log_start, now.high_watermark))
        estimate = tail.payload_bytes + RECORD_OVERHEAD_BYTES * tail.records
        facts["retained_bytes_estimate"] = estimate
        by_size = not tail.unseen and estimate >= retention_bytes
    return "retention.ms" if by_time else "retention.bytes" if by_size else None


def _leadership(
    before: PartitionState, now: PartitionState, config: Mapping[str, str], evidence: Evidence
) -> list[Alert]:
    """Availability (no leader, ISR below min.insync.replicas) and what a new leader or epoch means."""
    facts = {
        "previous_leader": before.leader,
        "previous_isr": list(before.isr),
        "previous_epoch": before.leader_epoch,
        "leader": now.leader,
        "isr": list(now.isr),
        "epoch": now.leader_epoch,
    }
    out = _availability(before, now, config, facts)
    epoch_changed = (
        now.leader_epoch is not None and before.leader_epoch is not None and now.leader_epoch > before.leader_epoch
    )
    if epoch_changed or (now.leader >= 0 and now.leader != before.leader):
        out.extend(_election(before, now, config, evidence, facts))
    elif 0 <= now.high_watermark < before.high_watermark:
        out.append(_truncation_hw(before, now, facts))
    return out


def _availability(
    before: PartitionState, now: PartitionState, config: Mapping[str, str], facts: Mapping[str, Any]
) -> list[Alert]:
    out = []
    if now.leader < 0 <= before.leader:
        out.append(_about(now, A.PARTITION_OFFLINE, A.WARNING, f"{now.topic}[{now.partition}] has no leader", facts))
    min_isr = config_number(config, "min.insync.replicas", 1)
    if now.leader >= 0 and len(now.isr) < min_isr <= len(before.isr):
        message = f"{now.topic}[{now.partition}] ISR {list(now.isr)} is below min.insync.replicas={min_isr}"
        out.append(_about(now, A.UNDER_MIN_ISR, A.WARNING, message, facts))
    return out


def _election(
    before: PartitionState,
    now: PartitionState,
    config: Mapping[str, str],
    evidence: Evidence,
    facts: Mapping[str, Any],
) -> list[Alert]:
    """A new leader or epoch: truncations found, then unclean election, or a clean change."""
    truncations = _chain_check(now, evidence, facts, "compact" in config.get("cleanup.policy", "delete"))
    if not truncations and 0 <= now.high_watermark < before.high_watermark:
        truncations.append(_truncation_hw(before, now, facts))
    # Polling samples the ISR: a replica can join it and be elected within one interval. So a leader
    # outside the ISR seen last is an unclean election only with evidence: records lost (critical), or
    # a topic that allows unclean elections (warning while no loss is found); otherwise a clean change.
    outside_isr = now.leader >= 0 and bool(before.isr) and now.leader not in before.isr
    unclean_allowed = str(config.get("unclean.leader.election.enable", "false")).lower() == "true"
    out: list[Alert] = []
    if outside_isr and (truncations or unclean_allowed):
        consequence = (
            "acknowledged records were lost (see the truncation alert)"
            if truncations
            else "the topic allows unclean elections; no loss found at the ledger's epoch boundaries yet"
        )
        message = (f"{now.topic}[{now.partition}]: broker {now.leader} became leader (epoch {now.leader_epoch}) "
                   f"but was not in the previous ISR {list(before.isr)}; {consequence}")  # fmt: skip
        out.append(_about(now, A.UNCLEAN_ELECTION, A.CRITICAL if truncations else A.WARNING, message, facts))
    elif not truncations and now.leader >= 0:
        joined = (
            f"; it joined the ISR after the previous poll ({list(before.isr)}): unclean elections are "
            "disabled for the topic and no truncation was found"
            if outside_isr
            else ""
        )
        message = (f"{now.topic}[{now.partition}]: clean leader change to broker {now.leader} "
                   f"(epoch {before.leader_epoch} -> {now.leader_epoch}){joined}")  # fmt: skip
        out.append(_about(now, A.LEADER_CHANGE, A.INFO, message, facts))
    return [*out, *truncations]


def _truncation_hw(before: PartitionState, now: PartitionState, facts: Mapping[str, Any]) -> Alert:
    return Alert(
        A.TRUNCATION,
        A.CRITICAL,
        f"{now.topic}[{now.partition}]: the high watermark went back {before.high_watermark} -> "
        f"{now.high_watermark}; acknowledged records were truncated",
        topic=now.topic,
        partition=now.partition,
        evidence={**facts, "previous_high_watermark": before.high_watermark, "high_watermark": now.high_watermark},
    )


def _chain_check(
    now: PartitionState, evidence: Evidence, facts: Mapping[str, Any], compacted: bool = False
) -> list[Alert]:
    """Spot-read the log at the ledger's epoch boundaries and last offset; report divergence.

    On a compacted topic an absent record below the high watermark may have been cleaned, so only
    a changed record (or one beyond the log end) counts there."""
    ledger, lookup = evidence.ledger, evidence.log_lookup
    if ledger is None or lookup is None or not ledger.available:
        return []
    chain = ledger.epoch_chain(now.topic, now.partition)
    last = ledger.last_offset(now.topic, now.partition)
    offsets = sorted({o for _, o in chain[-MAX_CHAIN_CHECKS:]} | ({last} if last is not None else set()))
    offsets = [o for o in offsets if o >= max(0, now.log_start)]
    if not offsets:
        return []
    ledgered = ledger.rows_at(now.topic, now.partition, offsets)
    present = lookup(now.topic, now.partition, offsets)
    diverged: list[dict[str, Any]] = []
    for off in offsets:
        want = ledgered.get(off)
        if want is None:
            continue
        got = present.get(off)
        if got is None and compacted and off < now.high_watermark:
            continue
        same = got is not None and all(
            want.get(k) == got.get(k) for k in ("key_hash", "value_hash", "headers_hash", "timestamp")
        )
        if not same:
            diverged.append(
                {
                    "offset": off,
                    "ledger_epoch": want.get("leader_epoch"),
                    "log_epoch": None if got is None else got.get("leader_epoch"),
                    "state": "absent" if got is None else "different content",
                }
            )
    if not diverged:
        return []
    first = diverged[0]
    return [
        Alert(
            A.TRUNCATION,
            A.CRITICAL,
            f"{now.topic}[{now.partition}]: ledgered offset {first['offset']} (epoch {first['ledger_epoch']}) is "
            f"{first['state']} in the log now (epoch {first['log_epoch']}); the log diverged from what was "
            "acknowledged",
            topic=now.topic,
            partition=now.partition,
            evidence={**facts, "ledger_epoch_chain": chain[-MAX_CHAIN_CHECKS:], "diverged": diverged},
        )
    ]


def _configs(prev: Observation, cur: Observation) -> list[Alert]:
    out: list[Alert] = []
    for topic in sorted(set(prev.configs) & set(cur.configs)):
        old, new = prev.configs[topic], cur.configs[topic]
        changes: list[tuple[str, str, str]] = []
        for key in ("retention.ms", "retention.bytes"):
            if key in old and key in new and _limit(config_number(new, key, -1)) < _limit(config_number(old, key, -1)):
                changes.append((key, old[key], new[key]))
        if old.get("unclean.leader.election.enable") == "false" and new.get("unclean.leader.election.enable") == "true":
            changes.append(("unclean.leader.election.enable", "false", "true"))
        if config_number(new, "min.insync.replicas", 1) < config_number(old, "min.insync.replicas", 1):
            changes.append(("min.insync.replicas", old["min.insync.replicas"], new["min.insync.replicas"]))
        old_policy, new_policy = old.get("cleanup.policy", "delete"), new.get("cleanup.policy", "delete")
        if "delete" in new_policy and "delete" not in old_policy:
            changes.append(("cleanup.policy", old_policy, new_policy))
        for key, a, b in changes:
            severity = A.CRITICAL if key == "unclean.leader.election.enable" else A.WARNING
            out.append(
                Alert(
                    A.CONFIG_WEAKENED,
                    severity,
                    f"{topic}: {key} changed {a} -> {b}, weakening durability",
                    topic=topic,
                    evidence={"config": key, "from": a, "to": b},
                )
            )
        rf_old, rf_new = prev.replication(topic), cur.replication(topic)
        if 0 < rf_new < rf_old:
            out.append(
                Alert(
                    A.REPLICATION_LOWERED,
                    A.WARNING,
                    f"{topic}: replication factor lowered {rf_old} -> {rf_new}",
                    topic=topic,
                    evidence={"from": rf_old, "to": rf_new},
                )
            )
    return out


def _deleted_topics(prev: Observation, cur: Observation, operations: Sequence[Operation]) -> list[Alert]:
    out = []
    recorded = {op.topic for op in operations if op.kind == TOPIC_DELETION}
    for topic in sorted(prev.topics() - cur.topics()):
        if topic in recorded:
            out.append(
                Alert(A.TOPIC_DELETED, A.INFO, f"topic {topic} deleted (recorded in the operations log)", topic=topic)
            )
        else:
            out.append(
                Alert(
                    A.TOPIC_DELETED, A.CRITICAL, f"topic {topic} was deleted and no deletion was recorded", topic=topic
                )
            )
    return out


# ------------------------------------------------------------------------------------ the loop


def kafka_log_lookup(client: ClientConfig) -> LogLookup:
    """Spot reads of single offsets with the audit reader (hashes, epochs).

    Checks run right after leader changes, when a new leader's high watermark may still trail the
    offsets the ledger saw committed; a short grace (then a look at the leader's high watermark)
    keeps that lag from reading as a truncation."""
    from strongroom.audit.kafka_reader import read_range

    connection = {"bootstrap.servers": client.bootstrap_servers, **dict(client.extra or {})}

    def lookup(topic: str, partition: int, offsets: Sequence[int]) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        for off in offsets:
            for batch in read_range(
                connection, topic, partition, off, off + 1, emit_range=False, idle_timeout=15, eof_grace=SPOT_EOF_GRACE
            ):
                for row in batch.to_pylist():
                    if row["offset"] == off:
                        found[off] = row
        return found

    return lookup


class Watcher:
    """Poll, evaluate, emit, remember. One instance per watched cluster and state file."""

    def __init__(
        self,
        client: ClientConfig,
        *,
        topics: Sequence[str] | None = None,
        ledger: LedgerPaths | None = None,
        state_path: Path,
        sink: Fanout,
        metrics: Any = None,
        exclude: Sequence[str] = (),
        clock_skew_ms: int = 5_000,
        timeout: float = 10.0,
        grace: float = 0.0,
        erasures: OverdueErasures | None = None,
    ) -> None:
        self.client = client
        #: Overdue erasures of a keys topic, checked on their own interval (``--check-erasures``).
        self.erasures = erasures
        self.topics = list(topics) if topics else None
        self.cluster = ClusterState(client, timeout=timeout)
        self.oplog = OperationsLog(client, timeout=timeout)
        self.ledger = LedgerView(ledger) if ledger is not None else None
        self.lookup = kafka_log_lookup(client)
        self.state_path = state_path
        self.sink = sink
        self.metrics = metrics
        self.exclude = {OPERATIONS_TOPIC, *exclude}
        self.clock_skew_ms = clock_skew_ms
        self.previous = self._load()
        self.polls = 0
        self.raised: list[Alert] = []
        #: seconds an unjustified log-start advance waits for its operations-log entry (0 = none)
        self.grace = grace
        self._pending: list[tuple[Alert, PartitionState, PartitionState, Mapping[str, str], float]] = []
        self._current = Observation(0, {}, {})
        self._configs: Mapping[str, Mapping[str, str]] = {}

    def _load(self) -> Observation | None:
        if not self.state_path.exists():
            return None
        try:
            data = json.loads(self.state_path.read_text())
            if int(data.get("version", 0)) != STATE_VERSION or data.get("bootstrap") != self.client.bootstrap_servers:
                log.warning("ignoring watcher state %s (other version or cluster)", self.state_path)
                return None
            return Observation.from_json(data["observation"])
        except Exception as exc:  # noqa: BLE001 - a damaged state file means "start fresh", with a warning
            log.warning("ignoring unreadable watcher state %s: %s", self.state_path, exc)
            return None

    def _save(self, obs: Observation) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        payload = {"version": STATE_VERSION, "bootstrap": self.client.bootstrap_servers, "observation": obs.to_json()}
        tmp.write_text(json.dumps(payload))
        tmp.replace(self.state_path)

    def _watched(self) -> list[str]:
        if self.topics is not None:
            return self.topics
        return [t for t in self.cluster.topic_names() if t not in self.exclude]

    def observe(self) -> Observation:
        names = self._watched()
        present = set(self.cluster.metadata().topics)
        states = self.cluster.describe([t for t in names if t in present])
        obs = Observation.of(states)
        self._current = obs
        self._configs = obs.configs
        return obs

    def _last_seen(self, key: tuple[str, int]) -> PartitionState:
        return self._current.partitions[key]

    def poll_once(self) -> list[Alert]:
        started = time.monotonic()
        cur = self.observe()
        operations = self.oplog.read()  # after observing: an operation recorded before it is seen
        evidence = Evidence(
            operations=operations, ledger=self.ledger, log_lookup=self.lookup, clock_skew_ms=self.clock_skew_ms
        )
        found = self._hold_back(evaluate(self.previous, cur, evidence), evidence)
        if self.erasures is not None:
            found += self.erasures.check()
        self._emit(found)
        if self.metrics is not None:
            self.metrics.observe(cur.partitions.values(), [], time.monotonic() - started, time.time())
        self.previous = cur
        self._save(cur)
        self.polls += 1
        return found

    def _emit(self, alerts: list[Alert]) -> None:
        self.sink.emit(alerts)
        self.raised.extend(alerts)
        if self.metrics is not None:
            for alert in alerts:
                self.metrics.alerts.labels(alert.kind, alert.severity).inc()

    def _hold_back(self, found: list[Alert], evidence: Evidence) -> list[Alert]:
        """Give a tool that deletes first and records right after (``strongroom recover apply``) the
        grace period to record: an unjustified log-start advance is re-judged against the operations
        log on later polls and raised only if still unjustified when the grace period ends."""
        out: list[Alert] = []
        now = time.monotonic()
        keep: list[tuple[Alert, PartitionState, PartitionState, Mapping[str, str], float]] = []
        bounds = deletion_bounds(evidence.operations)
        for alert, before, after, config, since in self._pending:
            again = _log_start(before, after, config, bounds.get((after.topic, after.partition)), evidence)
            if any(a.kind == A.LSO_ADVANCE_UNJUSTIFIED for a in again) and now - since < self.grace:
                keep.append((alert, before, after, config, since))
            else:
                out.extend(again)
        for alert in found:
            held = self.grace > 0 and alert.kind == A.LSO_ADVANCE_UNJUSTIFIED and alert.partition is not None
            if held and self.previous is not None and alert.topic is not None:
                key = (alert.topic, int(alert.partition or 0))
                before = self.previous.partitions[key]
                after = self._last_seen(key)
                keep.append((alert, before, after, dict(self._configs.get(alert.topic, {})), now))
            else:
                out.append(alert)
        self._pending = keep
        return out

    def flush_pending(self) -> list[Alert]:
        """Raise whatever is still held (on exit: unjustified is unjustified)."""
        alerts = [a for a, *_ in self._pending]
        self._pending = []
        self._emit(alerts)
        return alerts

    def run(
        self,
        *,
        interval: float = 5.0,
        once: bool = False,
        duration: float | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        deadline = None if duration is None else time.monotonic() + duration
        while True:
            try:
                self.poll_once()
            except Exception as exc:
                if once:
                    raise
                if self.metrics is not None:
                    self.metrics.poll_errors.inc()
                log.warning("watcher poll failed (will retry): %s", exc)
            if once or (deadline is not None and time.monotonic() >= deadline):
                self.flush_pending()
                return
            wait_until = time.monotonic() + interval
            while time.monotonic() < wait_until:
                if (should_stop is not None and should_stop()) or (
                    deadline is not None and time.monotonic() >= deadline
                ):
                    self.flush_pending()
                    return
                time.sleep(min(0.2, max(0.0, wait_until - time.monotonic())))
