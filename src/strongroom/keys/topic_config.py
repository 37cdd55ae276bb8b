"""The keys topic: its default name and the topic configuration that makes erasure finish in bounded time.

Subject keys live in a compacted topic. An erasure writes tombstones; the old key records are only
physically gone once the log cleaner has compacted the segments holding them. With Kafka's defaults
that may never happen: the active segment rolls only after ``segment.ms`` (7 days) or ``segment.bytes``
(1 GiB, never reached by a small keys topic), and ``max.compaction.lag.ms`` is unbounded. These
settings bound it: a record becomes eligible for compaction at most ``max.compaction.lag.ms`` after it
was written, and the active segment rolls every ``segment.ms``.

``strongroom doctor`` checks existing keys topics against :data:`KEYS_TOPIC_CONFIG` and
:func:`compaction_blockers`.
"""

from __future__ import annotations

from collections.abc import Mapping

KEYS_TOPIC_DEFAULT = "strongroom-keys"

HOUR_MS = 60 * 60 * 1000

#: Topic configuration strongroom uses when it creates a keys topic (tests shorten the times).
KEYS_TOPIC_CONFIG: dict[str, str] = {
    # Compaction only: a time- or size-based delete would destroy live keys and with them the data.
    "cleanup.policy": "compact",
    # Roll the active segment hourly so tombstoned keys leave the (never compacted) active segment.
    "segment.ms": str(HOUR_MS),
    # Any record is compacted at most this long after it was written: the erasure deadline.
    "max.compaction.lag.ms": str(6 * HOUR_MS),
    "min.compaction.lag.ms": "0",
    "min.cleanable.dirty.ratio": "0.1",
    # How long tombstones stay readable so running readers evict erased keys.
    "delete.retention.ms": str(24 * HOUR_MS),
    "unclean.leader.election.enable": "false",
}

#: Beyond this, an erasure cannot be verified within a reasonable deadline (GDPR: "without undue delay").
MAX_REASONABLE_COMPACTION_MS = 7 * 24 * HOUR_MS


def compaction_blockers(config: Mapping[str, str]) -> list[str]:
    """Reasons why compaction of a keys topic with this (effective) configuration may never finish an erasure.

    ``config`` holds the topic's effective values (topic overrides merged over broker defaults).
    Returns human-readable reasons; an empty list means erasure completes in bounded time.
    """
    reasons: list[str] = []
    policy = {p.strip() for p in config.get("cleanup.policy", "delete").split(",")}
    if "compact" not in policy:
        reasons.append("cleanup.policy does not include compact: tombstones never remove the erased keys")
    if "delete" in policy:
        reasons.append("cleanup.policy includes delete: retention will delete live keys and make their data unreadable")
    segment_ms = int(config.get("segment.ms", str(7 * 24 * HOUR_MS)))
    max_lag = int(config.get("max.compaction.lag.ms", str(2**63 - 1)))
    if max_lag > MAX_REASONABLE_COMPACTION_MS:
        reasons.append(
            f"max.compaction.lag.ms={max_lag}: nothing forces compaction, an erased key can stay readable indefinitely"
        )
    if segment_ms > MAX_REASONABLE_COMPACTION_MS:
        reasons.append(f"segment.ms={segment_ms}: the active segment (never compacted) rolls too rarely")
    ratio = float(config.get("min.cleanable.dirty.ratio", "0.5"))
    if ratio >= 0.9 and max_lag > MAX_REASONABLE_COMPACTION_MS:
        reasons.append(f"min.cleanable.dirty.ratio={ratio}: the cleaner waits for an almost entirely dirty log")
    return reasons


#: The registry of running key readers (heartbeats, one record per reader id, compacted).
READERS_TOPIC_DEFAULT = "strongroom-key-readers"

READERS_TOPIC_CONFIG: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.ms": str(HOUR_MS),
    "max.compaction.lag.ms": str(6 * HOUR_MS),
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": str(24 * HOUR_MS),
}

#: Broker default of ``log.cleaner.backoff.ms`` (how long an idle cleaner thread sleeps).
CLEANER_BACKOFF_DEFAULT_MS = 15_000


def roll_deadline_ms(config: Mapping[str, str]) -> int:
    """How long after its first record the active segment is rolled, *given a later append*.

    Kafka rolls a compacted log's active segment at the first append after
    ``min(segment.ms, max.compaction.lag.ms)``; without an append nothing rolls, which is why
    ``strongroom erasure status`` appends a no-op "nudge" record when that time has passed.
    """
    segment_ms = int(config.get("segment.ms", str(7 * 24 * HOUR_MS)))
    max_lag = int(config.get("max.compaction.lag.ms", str(2**63 - 1)))
    return min(segment_ms, max_lag)


def erasure_deadline_ms(config: Mapping[str, str], cleaner_backoff_ms: int = CLEANER_BACKOFF_DEFAULT_MS) -> int:
    """Upper bound (ms after the tombstones were written) for the erased key records to be compacted away.

    ``min(segment.ms, max.compaction.lag.ms)`` until the active segment holding the tombstones rolls
    (at the next append — traffic or a nudge), then at most ``max.compaction.lag.ms`` from the
    records' timestamps until the cleaner must pick the log, plus one cleaner back-off. The two
    intervals overlap (both count from the same records), so the bound is the larger one plus the
    back-off. Cleaning itself and a busy cleaner (one thread, many logs) come on top.
    """
    max_lag = int(config.get("max.compaction.lag.ms", str(2**63 - 1)))
    return max(roll_deadline_ms(config), max_lag) + cleaner_backoff_ms
