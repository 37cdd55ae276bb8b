"""The decrypting consumer: poll encrypted topics, get plaintext, exactly as the Spark decrypt pipeline sees it.

``DecryptingConsumer.poll()`` returns a :class:`~strongroom.clients.records.DecryptedMessage` per record:
decrypted (marker header removed, other headers, key and timestamp as they were), passed through (tombstones
and unencrypted records), or — for an erased subject — with its encrypted fields set to null (field
mode) or dropped / marked with a null value and a ``strongroom.erased`` header (whole-value mode,
``erased="drop" | "mark"``).

Records are never lost and never delivered out of partition order:

* **Key not arrived yet** (data replicated ahead of its keys): the partition is paused and the consumer
  seeks back to the record; ``poll`` keeps serving other partitions and re-checks the key table every
  ``recheck_interval_s``; when the key arrives the partition resumes at that record. A record waiting
  longer than ``pending_timeout_s`` becomes a failure under the failure policy.
* **KMS unreachable**: the same hold, retried with exponential backoff; it is never reported as a lost
  key. After ``kms_outage_wait_s`` ``poll`` raises :class:`~strongroom.clients.errors.KmsOutage` (and keeps
  the record for the next poll) whatever the failure policy: an outage is not a reason to skip data.
* **Cannot decrypt** (lost or disabled KEK, tampered or moved record, unknown format version, no
  subject): ``on_failure="fail"`` (default) seeks back to the record and raises
  :class:`~strongroom.clients.errors.DecryptFailed` naming topic, partition, offset and the KEK or reason;
  the consumer stays usable and the next ``poll`` delivers that record again, so an application that
  retries after the KEK is restored heals without a restart. ``"dead-letter"`` sends the ciphertext
  unchanged to the dead-letter topic with ``strongroom.dead-letter.reason``/``.source`` headers;
  ``"skip"`` drops it. Both are counted (:meth:`DecryptingConsumer.metrics`).

Offsets: the consumer stores a record's offset only once the record is finished (delivered to the
application, dropped, skipped or dead-lettered — the dead-letter producer is flushed before a commit),
with ``enable.auto.offset.store=false``; :meth:`DecryptingConsumer.commit` commits those, so a commit never
moves past a record that is waiting for its key.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, Producer, TopicPartition

from strongroom.clients.batch_open import KeyCiphers, OpenTarget, open_simple, open_target
from strongroom.clients.errors import ClientClosed, DecryptFailed, DeliveryFailed, KmsOutage
from strongroom.clients.records import (
    DEAD_LETTER_REASON,
    DEAD_LETTER_SOURCE,
    ERASED_HEADER,
    DecryptedMessage,
    Header,
    MessageStatus,
    rule_for_encrypted,
    without_marker,
)
from strongroom.clients.sealing import Erased, Failed, KmsDown, Opened, Outcome, Passthrough, Pending, RuleCodec
from strongroom.errors import ConfigError, KafkaError, KeysError, KmsError, StrongroomError
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.kafka.topics import TopicLimits
from strongroom.kafka.transport import build_consumer, build_producer, consume_ready, error_code
from strongroom.keys.table import KeyTable
from strongroom.metrics import RecordSample, metrics_for
from strongroom.policies import OnErasedRecord, OnFailure, OnPending, choose
from strongroom.rules import EncryptionRules
from strongroom.runtime import collector_paused
from strongroom.schemas.registry import SchemaRegistry

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

RebalanceCallback = Callable[[Any, list[TopicPartition]], None]

_KMS_BACKOFF_START: Final = 0.5
_KMS_BACKOFF_MAX: Final = 10.0
_IDLE_SLICE: Final = 1.0
#: Records taken from librdkafka per call once one is available (fewer Python↔C round trips).
_FETCH_BATCH: Final = 500
#: What :meth:`DecryptingConsumer.metrics` counts (see the module docstring for each outcome).
_COUNTERS: Final = (
    "decrypted",
    "passthrough",
    "erased_fields",
    "erased_dropped",
    "erased_marked",
    "failed",
    "failures_raised",
    "dead_lettered",
    "skipped",
    "held",
    "released",
    "pending_timeouts",
    "kms_retries",
    "kafka_errors",
)


@dataclass
class _Wait:
    """The record a partition waits on, kept across re-holds so timeouts count from the first wait."""

    offset: int
    since: float
    attempts: int = 0


@dataclass
class _Hold:
    """A paused partition (its position sought back to ``offset``) and when to look again."""

    offset: int
    kind: Literal["key", "kms"]
    next_check: float
    key_id: bytes | None = None
    subject: str | None = None


class DecryptingConsumer:
    """A confluent-kafka consumer that decrypts per topic rule. Not thread-safe (like the consumer it wraps).

    ``key_table`` is the caller's (one per process, shared by every consumer); :meth:`close` leaves it open.
    ``topic_map`` maps physical topics to the logical names the data was sealed under (mirrors: ``us.orders.enc``
    → ``orders.enc``). ``encrypted_only`` (default) fails a record without the ``strongroom.enc`` marker
    (a plaintext or downgraded record, docs/threat-model.md); ``False`` delivers such records as they are.
    ``consumer_overrides`` go on top of the resilient defaults of :mod:`strongroom.kafka.config`
    (``enable.auto.offset.store`` is always false).
    """

    def __init__(
        self,
        client_config: ClientConfig,
        rules: EncryptionRules,
        key_table: KeyTable,
        *,
        group_id: str,
        topic_map: Mapping[str, str] | None = None,
        on_failure: OnFailure | str = OnFailure.FAIL,
        erased: OnErasedRecord | str = OnErasedRecord.DROP,
        pending: OnPending | str = OnPending.WAIT,
        dead_letter_topic: str | None = None,
        consumer_overrides: Mapping[str, Any] | None = None,
        pending_timeout_s: float = 300.0,
        kms_outage_wait_s: float = 1800.0,
        recheck_interval_s: float = 0.1,
        create_topics: bool = True,
        encrypted_only: bool = True,
        registry: CollectorRegistry | None = None,
        schema_registry: SchemaRegistry | None = None,
    ) -> None:
        self.on_failure = choose("on_failure", on_failure, OnFailure, ConfigError)
        self.erased = choose("erased", erased, OnErasedRecord, ConfigError)
        self.pending = choose("pending", pending, OnPending, ConfigError)
        if self.on_failure == OnFailure.DEAD_LETTER and not dead_letter_topic:
            raise ConfigError("on_failure='dead-letter' needs a dead-letter topic", hint="pass dead_letter_topic=...")
        self.client_config = client_config
        self.rules = rules
        self.table = key_table
        self.topic_map = dict(topic_map or {})
        self.dead_letter_topic = dead_letter_topic
        self.pending_timeout_s = pending_timeout_s
        self.kms_outage_wait_s = kms_outage_wait_s
        self.recheck_interval_s = recheck_interval_s
        self.create_topics = create_topics
        self.encrypted_only = encrypted_only
        #: For schema-mode rules (docs/schema-aware.md); waits out a registry outage, never guesses.
        self.schema_registry = schema_registry
        self.config = client_config.consumer(
            group_id, {**(consumer_overrides or {}), "enable.auto.offset.store": False}
        )
        self._consumer = build_consumer(self.config)
        self._codecs: dict[str, tuple[RuleCodec, str]] = {}
        #: The batch path (:mod:`strongroom.clients.batch_open`): per topic, and the subject keys' ciphers.
        self._open_targets: dict[str, OpenTarget | None] = {}
        self._ciphers = KeyCiphers.shared(key_table)
        self._holds: dict[tuple[str, int], _Hold] = {}
        #: Messages taken from librdkafka but not handled yet (dropped for a partition that seeks).
        self._buffer: deque[Any] = deque()
        self._revoked: set[tuple[str, int]] = set()
        self._waits: dict[tuple[str, int], _Wait] = {}
        self._dlq: Producer | None = None
        self._dlq_errors: list[str] = []
        self._closed = False
        self.counters: dict[str, int] = dict.fromkeys(_COUNTERS, 0)
        self.failures_by_cause: dict[str, int] = {}
        if registry is not None:  # Prometheus (docs/metrics.md): read from self.counters at each scrape
            metrics_for(registry).watch_records("consumer", self.record_sample)

    # ------------------------------------------------------------------ subscription
    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe (``^`` prefix for regex topics). Callbacks receive this consumer and the partitions."""
        self._check_open()

        def assigned(_: Any, partitions: list[TopicPartition]) -> None:
            self._forget(partitions)
            if on_assign is not None:
                on_assign(self, partitions)

        def revoked(_: Any, partitions: list[TopicPartition]) -> None:
            self._forget(partitions)
            if on_revoke is not None:
                on_revoke(self, partitions)

        def lost(_: Any, partitions: list[TopicPartition]) -> None:
            self._forget(partitions)
            if on_lost is not None:
                on_lost(self, partitions)
            elif on_revoke is not None:
                on_revoke(self, partitions)

        self._consumer.subscribe(list(topics), on_assign=assigned, on_revoke=revoked, on_lost=lost)

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        self._holds.clear()
        self._waits.clear()
        self._buffer.clear()
        self._consumer.assign(list(partitions))

    def unsubscribe(self) -> None:
        self._check_open()
        self._holds.clear()
        self._waits.clear()
        self._buffer.clear()
        self._consumer.unsubscribe()

    def assignment(self) -> list[TopicPartition]:
        return list(self._consumer.assignment())

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        return list(self._consumer.position(list(partitions)))

    def held_partitions(self) -> dict[tuple[str, int], int]:
        """Partitions paused because their next record waits (for a key or the KMS): → that record's offset."""
        return {tp: hold.offset for tp, hold in self._holds.items()}

    # ------------------------------------------------------------------ polling
    def poll(self, timeout: float | None = None) -> DecryptedMessage | None:
        """The next record, decrypted; None when ``timeout`` (seconds; None waits forever) passes first.

        Raises :class:`DecryptFailed` under ``on_failure="fail"`` (the record comes again on the next poll)
        and :class:`KmsOutage` when the KMS stays down longer than ``kms_outage_wait_s``.
        """
        self._check_open()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            self._release_holds()
            now = time.monotonic()
            wait = _IDLE_SLICE if deadline is None else max(0.0, deadline - now)
            if self._holds:
                wait = min(wait, self.recheck_interval_s)
            msg = self._next(wait)
            if msg is not None:
                out = self._handle(msg)
                if out is not None:
                    return out
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def _next(self, wait: float) -> Any:
        """The next raw message: from the local batch, else wait for one and take what else is ready."""
        if self._buffer:
            return self._buffer.popleft()
        msg = self._consumer.poll(wait)
        if msg is not None:
            self._revoked.clear()
            more = self._consumer.consume(_FETCH_BATCH, 0)  # may run a rebalance callback
            self._buffer.extend(more)
            if self._revoked and (msg.topic(), msg.partition()) in self._revoked:
                return None  # its partition moved to another member, which starts at the committed offset
        return msg

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[DecryptedMessage]:
        """Up to ``num_messages`` records within ``timeout``: the batch path for simple records
        (:mod:`strongroom.clients.batch_open`), :meth:`poll` for every other one, in partition order."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        out: list[DecryptedMessage] = []
        while len(out) < num_messages:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._holds and not self._waits:
                wait = _IDLE_SLICE if remaining is None else remaining
                before = len(out)
                fetched = self._consume_simple(num_messages - before, wait, out)
                if len(out) > before:
                    continue
                if not fetched and not self._buffer:
                    if deadline is None or time.monotonic() < deadline:
                        continue
                    break
            try:
                msg = self.poll(remaining)
            except StrongroomError:
                if out:  # hand over what is finished; the failing record comes again on the next call
                    return out
                raise
            if msg is None:
                break
            out.append(msg)
        return out

    def _consume_simple(self, limit: int, wait: float, out: list[DecryptedMessage]) -> int:
        """Open the simple records at the head of the stream in one pass; what follows the first other
        one goes back to the local buffer for :meth:`poll`. The number of records taken."""
        self.table.check_alive()  # a table that stopped reading cannot vouch for cached keys
        msgs = self._take(limit, wait)
        if not msgs:
            return 0
        finished: dict[tuple[str, int], int] = {}
        with collector_paused:  # the opened messages all live on in ``out``: nothing to collect among them
            opened = open_simple(msgs, self._open_target, self._ciphers, out, finished)
        if opened < len(msgs):
            self._buffer.extendleft(reversed(msgs[opened:]))
        if finished:
            self.counters["decrypted"] += opened
            self._store_finished(finished)
        return len(msgs)

    def _take(self, limit: int, wait: float) -> list[Any]:
        """Up to ``limit`` raw messages: the local buffer's first, else what librdkafka has within ``wait``."""
        if self._buffer:
            return [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
        # A rebalance callback may run inside this call; librdkafka then discards what it had fetched for
        # the old assignment, so every message returned belongs to the current one (the callbacks have
        # already dropped this consumer's own buffered messages of the moved partitions).
        return consume_ready(self._consumer, limit, wait)

    def _store_finished(self, finished: dict[tuple[str, int], int]) -> None:
        offsets = [TopicPartition(topic, partition, offset + 1) for (topic, partition), offset in finished.items()]
        try:
            self._consumer.store_offsets(offsets=offsets)
        except KafkaException as exc:  # a partition was revoked meanwhile: its new owner re-reads it
            log.warning("cannot store offsets %s: %s", offsets, exc)

    def _open_target(self, topic: str) -> OpenTarget | None:
        if topic in self._open_targets:
            return self._open_targets[topic]
        try:
            codec, bound = self._codec_for(topic)
        except StrongroomError:
            return None  # the per-record path raises it, after seeking back to the record
        target = None
        if codec.rule.subject.source == "key" and codec.schema is None:  # schema mode: the per-record path
            fields_codec = codec if codec.fields is not None else None
            target = open_target(codec.marker, bound, fields_codec, self._ciphers.openers)
        self._open_targets[topic] = target
        return target

    # ------------------------------------------------------------------ commit / close
    def commit(
        self, message: DecryptedMessage | None = None, asynchronous: bool = False
    ) -> list[TopicPartition] | None:
        """Commit the finished records (or up to ``message``); dead letters are made durable first."""
        self._check_open()
        self._flush_dead_letters()
        offsets = None if message is None else [TopicPartition(message.topic, message.partition, message.offset + 1)]
        try:
            if asynchronous:
                if offsets is None:
                    self._consumer.commit(asynchronous=True)
                else:
                    self._consumer.commit(offsets=offsets, asynchronous=True)
                return None
            if offsets is None:
                return list(self._consumer.commit(asynchronous=False))
            return list(self._consumer.commit(offsets=offsets, asynchronous=False))
        except KafkaException as exc:
            if error_code(exc) == RdKafkaError._NO_OFFSET:
                return None
            raise KafkaError(
                f"cannot commit offsets: {exc}", hint="check the brokers and the group; then retry"
            ) from None

    def close(self) -> None:
        """Flush dead letters and leave the group (uncommitted progress is not committed; commit first)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._dlq is not None:
                self._dlq.flush(30)
        finally:
            self._consumer.close()

    def __enter__(self) -> DecryptingConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[str, Any]:
        return {
            **self.counters,
            "failures_by_cause": dict(self.failures_by_cause),
            "held_partitions": {f"{t}[{p}]": o for (t, p), o in self.held_partitions().items()},
        }

    def record_sample(self) -> RecordSample:
        """The counters in the metrics' words: each record once (``decrypted`` is ``opened``; ``failed``
        includes the dead-lettered, skipped and raised ones), and the partitions waiting for a key."""
        c = dict(self.counters)
        outcomes = {
            "opened": c["decrypted"],
            "passthrough": c["passthrough"],
            "erased_dropped": c["erased_dropped"],
            "erased_marked": c["erased_marked"],
            "failed": c["failed"],
        }
        waits = [w.since for w in list(self._waits.values())]
        age = max(0.0, time.monotonic() - min(waits)) if waits else 0.0
        return RecordSample(outcomes, dead_lettered=c["dead_lettered"], pending=len(waits), oldest_pending_age_s=age)

    # ------------------------------------------------------------------ one record
    def _handle(self, msg: Any) -> DecryptedMessage | None:
        err = msg.error()
        if err is not None:
            if err.code() == RdKafkaError._PARTITION_EOF:
                return None
            if err.fatal():
                raise KafkaError(f"the consumer failed: {err}", hint="create a new consumer")
            self.counters["kafka_errors"] += 1
            log.warning("consumer: %s (librdkafka retries)", err)
            return None
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        tp = (topic, partition)
        if tp in self._holds:
            return None  # fetched before the pause; it comes again when the partition resumes
        if not self._waits and self._open_target(topic) is not None:
            self.table.check_alive()
            simple: list[DecryptedMessage] = []
            finished: dict[tuple[str, int], int] = {}
            if open_simple((msg,), self._open_target, self._ciphers, simple, finished):
                self.counters["decrypted"] += 1
                self._store_finished(finished)
                return simple[0]
        headers: list[Header] = msg.headers() or []  # confluent-kafka gives (str, bytes | None) tuples
        try:
            codec, bound = self._codec_for(topic)
            outcome = codec.open(msg.key(), msg.value(), headers, bound, self.table.lookup)
        except StrongroomError:
            self._seek(topic, partition, offset)
            raise
        return self._apply(msg, headers, outcome)

    def _apply(self, msg: Any, headers: list[Header], outcome: Outcome) -> DecryptedMessage | None:
        if isinstance(outcome, Opened):
            self.counters["decrypted"] += 1
            if outcome.erased_fields:
                self.counters["erased_fields"] += 1
            self._done(msg)
            return _message(msg, outcome.value, outcome.headers, MessageStatus.DECRYPTED, outcome.subject,
                            outcome.erased_fields)  # fmt: skip
        if isinstance(outcome, Passthrough):
            self.counters["passthrough"] += 1
            self._done(msg)
            return _message(msg, msg.value(), headers, MessageStatus.PASSTHROUGH, None, False)
        if isinstance(outcome, Erased):
            self._done(msg)
            if self.erased == "drop":
                self.counters["erased_dropped"] += 1
                return None
            self.counters["erased_marked"] += 1
            marked = [*without_marker(headers), (ERASED_HEADER, b"1")]
            return _message(msg, None, marked, MessageStatus.ERASED, outcome.subject, False)
        if isinstance(outcome, Pending):
            return self._on_pending(msg, headers, outcome)
        if isinstance(outcome, KmsDown):
            return self._on_kms_down(msg, outcome)
        return self._on_failure(msg, headers, outcome)

    def _on_pending(self, msg: Any, headers: list[Header], outcome: Pending) -> DecryptedMessage | None:
        key_id = outcome.key_ref.key_id
        wait = self._wait_for(msg)
        waited = time.monotonic() - wait.since
        if self.pending == "fail" or waited >= self.pending_timeout_s:
            if self.pending == "wait":
                self.counters["pending_timeouts"] += 1
            after = f" after {waited:.0f}s" if self.pending == "wait" else ""
            reason = f"subject key {key_id.hex()} has not arrived in keys topic {self.table.topic!r}{after}"
            return self._on_failure(msg, headers, Failed(reason, None, outcome.key_ref), cause_name="KeyNotArrived")
        self._hold(msg, _Hold(msg.offset(), "key", time.monotonic() + self.recheck_interval_s, key_id, outcome.subject))
        return None

    def _on_kms_down(self, msg: Any, outcome: KmsDown) -> DecryptedMessage | None:
        wait = self._wait_for(msg)
        waited = time.monotonic() - wait.since
        if waited >= self.kms_outage_wait_s:
            self._seek(msg.topic(), msg.partition(), msg.offset())
            self._waits.pop((msg.topic(), msg.partition()), None)
            raise KmsOutage(
                f"cannot decrypt {_where(msg)}: the KMS has been unreachable for {waited:.0f}s "
                f"({outcome.error.problem})"
            )
        self.counters["kms_retries"] += 1
        delay = min(_KMS_BACKOFF_MAX, _KMS_BACKOFF_START * 2**wait.attempts) * (0.5 + random.random() / 2)
        wait.attempts += 1
        log.warning("KMS unreachable at %s (%s); retrying in %.1fs", _where(msg), outcome.error.problem, delay)
        self._hold(msg, _Hold(msg.offset(), "kms", time.monotonic() + delay))
        return None

    def _on_failure(
        self, msg: Any, headers: list[Header], outcome: Failed, cause_name: str | None = None
    ) -> DecryptedMessage | None:
        cause = cause_name or (type(outcome.error).__name__ if outcome.error is not None else "Undecryptable")
        self.counters["failed"] += 1
        self.failures_by_cause[cause] = self.failures_by_cause.get(cause, 0) + 1
        kek_ref = self._kek_of(outcome)
        reason = outcome.reason
        if kek_ref is not None and outcome.key_ref is not None:
            reason = f"subject key {outcome.key_ref.key_id.hex()} under KEK {kek_ref} cannot be unwrapped: {reason}"
        if self.on_failure == "fail":
            self.counters["failures_raised"] += 1
            self._seek(msg.topic(), msg.partition(), msg.offset())
            hint = None
            if outcome.error is not None:
                hint = f"{outcome.error.hint}; the next poll delivers this record again"
            raise DecryptFailed(
                f"cannot decrypt {_where(msg)}: {reason}",
                topic=msg.topic(),
                partition=msg.partition(),
                offset=msg.offset(),
                reason=reason,
                cause=outcome.error,
                kek_ref=kek_ref,
                hint=hint,
            )
        if self.on_failure == "dead-letter":
            self._dead_letter(msg, headers, reason)
            self.counters["dead_lettered"] += 1
        else:
            self.counters["skipped"] += 1
            log.warning("skipped %s: %s", _where(msg), reason)
        self._done(msg)
        return None

    def _kek_of(self, outcome: Failed) -> str | None:
        if outcome.key_ref is None or not isinstance(outcome.error, KmsError | KeysError):
            return None
        try:
            return self.table.kek_of_key(outcome.key_ref.key_id)
        except StrongroomError:
            return None

    # ------------------------------------------------------------------ holds
    def _wait_for(self, msg: Any) -> _Wait:
        tp = (msg.topic(), msg.partition())
        wait = self._waits.get(tp)
        if wait is None or wait.offset != msg.offset():
            wait = self._waits[tp] = _Wait(msg.offset(), time.monotonic())
        return wait

    def _hold(self, msg: Any, hold: _Hold) -> None:
        tp = TopicPartition(msg.topic(), msg.partition())
        self._consumer.pause([tp])
        self._seek(msg.topic(), msg.partition(), msg.offset())
        self._holds[(msg.topic(), msg.partition())] = hold
        self.counters["held"] += 1

    def _release_holds(self) -> None:
        if not self._holds:
            return
        now = time.monotonic()
        for tp, hold in list(self._holds.items()):
            if hold.next_check > now:
                continue
            if hold.kind == "key" and not self._key_ready(tp, hold, now):
                hold.next_check = now + self.recheck_interval_s
                continue
            del self._holds[tp]
            self.counters["released"] += 1
            self._consumer.resume([TopicPartition(tp[0], tp[1])])

    def _key_ready(self, tp: tuple[str, int], hold: _Hold, now: float) -> bool:
        """True when the held record should be tried again (key here or erased, a new error, or timed out)."""
        wait = self._waits.get(tp)
        if wait is not None and now - wait.since >= self.pending_timeout_s:
            return True
        assert hold.key_id is not None
        try:
            return self.table.lookup(hold.key_id, hold.subject) is not None
        except StrongroomError:  # erased, KEK problems, KMS down: the record's own path decides
            return True

    def _forget(self, partitions: Sequence[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        for key in gone:
            self._holds.pop(key, None)
            self._waits.pop(key, None)
        self._revoked |= gone
        self._drop_buffered(gone)

    def _drop_buffered(self, partitions: set[tuple[str, int]]) -> None:
        if self._buffer:
            kept = [m for m in self._buffer if (m.topic(), m.partition()) not in partitions]
            self._buffer.clear()
            self._buffer.extend(kept)

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        """Make ``offset`` the partition's next record (later ones already taken are dropped: they come again)."""
        self._drop_buffered({(topic, partition)})
        try:
            self._consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as exc:  # not assigned any more: the group restarts it from the committed offset
            log.warning("cannot seek %s[%d] back to %d: %s", topic, partition, offset, exc)

    def _done(self, msg: Any) -> None:
        """The record is finished: its offset may be committed."""
        tp = (msg.topic(), msg.partition())
        wait = self._waits.get(tp)
        if wait is not None and msg.offset() >= wait.offset:
            del self._waits[tp]
        try:
            self._consumer.store_offsets(message=msg)
        except KafkaException as exc:  # the partition was revoked meanwhile: its new owner re-reads it
            log.warning("cannot store the offset of %s: %s", _where(msg), exc)

    # ------------------------------------------------------------------ helpers
    def _codec_for(self, topic: str) -> tuple[RuleCodec, str]:
        entry = self._codecs.get(topic)
        if entry is None:
            rule = rule_for_encrypted(self.rules, topic)
            entry = self._codecs[topic] = (
                RuleCodec(rule, encrypted_only=self.encrypted_only, schema_registry=self.schema_registry),
                self.topic_map.get(topic, topic),
            )
        return entry

    def _dead_letter(self, msg: Any, headers: list[Header], reason: str) -> None:
        assert self.dead_letter_topic is not None
        if self._dlq is None:
            conf = self.client_config.producer()
            limits = TopicLimits.for_producer(self.client_config, conf, create=self.create_topics)
            limits.max_value_bytes(self.dead_letter_topic, msg.topic())
            self._dlq = build_producer(conf)
        source = f"{msg.topic()}/{msg.partition()}/{msg.offset()}".encode()
        out_headers = [*headers, (DEAD_LETTER_REASON, reason.encode("utf-8")), (DEAD_LETTER_SOURCE, source)]
        kwargs: dict[str, Any] = {"key": msg.key(), "value": msg.value(), "headers": out_headers}
        ts_type, ts = msg.timestamp()
        if ts_type != 0 and ts >= 0:
            kwargs["timestamp"] = ts
        produce_when_room(self._dlq, self.dead_letter_topic, on_delivery=self._on_dlq_delivery, **kwargs)
        self._dlq.poll(0)

    def _on_dlq_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._dlq_errors.append(f"{msg.topic()}: {err}")

    def _flush_dead_letters(self) -> None:
        if self._dlq is None:
            return
        remaining = self._dlq.flush(60)
        errors, self._dlq_errors = self._dlq_errors, []
        if remaining or errors:
            first = errors[0] if errors else f"{remaining} still queued"
            raise DeliveryFailed(
                f"dead-lettered records were not delivered to {self.dead_letter_topic!r} ({first}); "
                "offsets were not committed",
                hint="check the dead-letter topic and the brokers, then commit again",
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("the decrypting consumer is closed")


def _message(
    msg: Any, value: bytes | None, headers: list[Header], status: MessageStatus, subject: str | None, erased: bool
) -> DecryptedMessage:
    ts_type, ts = msg.timestamp()
    return DecryptedMessage(
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        key=msg.key(),
        value=value,
        headers=headers,
        timestamp=None if ts_type == 0 else ts,
        timestamp_type=ts_type,
        leader_epoch=msg.leader_epoch(),
        status=status,
        subject=subject,
        erased_fields=erased,
    )


def _where(msg: Any) -> str:
    return f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
