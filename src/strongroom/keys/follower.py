"""The key table's reader thread: follows every partition of the keys topic into the local store.

It never stops reading (erasure markers reach running readers within a poll interval), applies records
in batches, remembers how far each partition is applied (so callers can wait for their own writes to
come back), and tells its owner what each batch changed through ``on_effects`` — the owner keeps the
in-memory caches. A failure of the thread is recorded: every wait, and every lookup of the owner,
fails closed afterwards.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError

from strongroom.errors import StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import consume_ready, new_consumer, watermarks
from strongroom.keys import records
from strongroom.keys.errors import CorruptKeyRecord, KeyTableClosed, KeyTableTimeout
from strongroom.keys.murmur2 import subject_partition, subject_partitions
from strongroom.keys.records import ErasureMarker, KeysRecord, SubjectKeyRow, WrappingKeyRecord
from strongroom.keys.store import ApplyEffects, ApplyItem, KeyStore
from strongroom.keys.topic import KeysTopic
from strongroom.runtime import collector_paused

log = logging.getLogger(__name__)

_PARTITION_CHECK_SECONDS: Final = 30.0
_MAX_PROBLEMS: Final = 20
#: Message-key prefixes of seal leases (single and batched) and seal slots, which only writers' key tables need.
_LEASE_PREFIXES: Final = (records.LEASE_PREFIX, records.LEASES_PREFIX, records.SLOT_PREFIX)
#: Records applied per store transaction at most (a catch-up applies whole fetches: fewer commits).
_FETCH_BATCH: Final = 20_000
#: librdkafka pre-fetches up to 64 MiB per consumer by default; a catching-up key table would keep that
#: much in its heap for good (the allocator does not give it back). A few MiB keep it busy just as well,
#: provided librdkafka fetches again as soon as the queue has room (``REFETCH_SOON``, in every consumer's
#: defaults).
_BOUNDED_FETCH: Final = {
    "queued.min.messages": 5000,
    "queued.max.messages.kbytes": 8192,
    "fetch.max.bytes": 4 * 1024 * 1024,
}


class KeysFollower:
    """Applies the keys topic to ``store`` in a background thread. The constructor does no I/O."""

    def __init__(
        self,
        client: ClientConfig,
        topic: str,
        store: KeyStore,
        partitions: int,
        *,
        on_effects: Callable[[ApplyEffects], None],
        on_reset: Callable[[], None],
        on_tick: Callable[[], None],
        poll_timeout: float = 0.1,
        skip_leases: bool = False,
    ) -> None:
        self.client = client
        self.topic = topic
        self.store = store
        self.partitions = partitions
        self.poll_timeout = poll_timeout
        self._on_effects = on_effects
        self._on_reset = on_reset
        self._on_tick = on_tick
        self._progress = threading.Condition()
        self._applied: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.eof: set[int] = set()
        self.corrupt_wks: set[bytes] = set()
        self.problems: deque[str] = deque(maxlen=_MAX_PROBLEMS)
        self.counters = {"records": 0, "corrupt": 0, "tombstones": 0, "misplaced": 0, "leases_skipped": 0}
        #: Seal-lease records are passed over unread (a table that never backs a writer, KeyTable's seal_usage).
        self.skip_leases = skip_leases
        #: The partition count subjects were placed by (the layout record's; the topic's until it is read).
        self.layout_partitions: int | None = None
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._probe: Consumer | None = None
        self._probe_lock = threading.Lock()
        self._ready = threading.Event()

    # ------------------------------------------------------------------ life cycle
    def start(self, on_ready: Callable[[], None]) -> None:
        """Start reading; ``on_ready`` runs in the thread once the partitions are assigned, before the
        first record is applied (the owner registers as a reader there)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, args=(on_ready,), name=f"strongroom-keytable-{self.topic}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        if self._probe is not None:
            self._probe.close()
        with self._progress:
            self._progress.notify_all()

    def check_alive(self) -> None:
        if self.failure is not None:
            raise KeyTableClosed(
                f"the key table's reader thread stopped: {self.failure}",
                hint="erasures are no longer applied; create a new KeyTable",
            )

    # ------------------------------------------------------------------ waiting
    def applied_offsets(self) -> dict[int, int]:
        """Next offset to apply per keys partition (everything below it is applied)."""
        with self._progress:
            return dict(self._applied)

    def caught_up(self) -> bool:
        return len(self.eof) >= self.partitions

    def wait_for_offsets(self, targets: Mapping[int, int], timeout: float = 60.0) -> None:
        """Block until every partition ``p`` in ``targets`` is applied up to (excluding) ``targets[p]``.

        ``timeout`` is how long the table may make *no progress* before :class:`KeyTableTimeout`: a
        cold table over ten million subjects takes minutes to catch up, and that is not a failure.
        """
        deadline = time.monotonic() + timeout
        progress = sum(self._applied.values())
        with self._progress:
            while True:
                self.check_alive()
                behind = {p: o for p, o in targets.items() if self._applied.get(p, 0) < o}
                if not behind:
                    return
                now_progress = sum(self._applied.values())
                if now_progress != progress:
                    progress = now_progress
                    deadline = time.monotonic() + timeout
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KeyTableTimeout(
                        f"key table of {self.topic!r} made no progress towards offsets {behind} for "
                        f"{timeout:.0f}s (it is at {{{', '.join(f'{p}: {self._applied.get(p, 0)}' for p in behind)}}})"
                    )
                self._progress.wait(min(remaining, 0.5))

    def wait_caught_up(self, timeout: float = 60.0) -> None:
        """Block until everything written to the keys topic before this call is applied."""
        ends = {p: high for p, (_, high) in self.watermarks().items()}
        self.wait_for_offsets(ends, timeout)

    def watermarks(self, partitions: list[int] | None = None) -> dict[int, tuple[int, int]]:
        wanted = list(range(self.partitions)) if partitions is None else partitions
        with self._probe_lock:
            if self._probe is None:
                self._probe = new_consumer(self.client, "strongroom-keys-probe", {"log_level": 0})
            return {p: watermarks(self._probe, self.topic, p, timeout=15) for p in wanted}

    # ------------------------------------------------------------------ the thread
    def _run(self, on_ready: Callable[[], None]) -> None:
        consumer: Consumer | None = None
        try:
            consumer = new_consumer(
                self.client,
                "strongroom-key-table",
                # a writer waits for its own keys to come back through here: fetch without delay
                {"enable.partition.eof": True, "fetch.wait.max.ms": 10, "log_level": 0, **_BOUNDED_FETCH},
            )
            self._assign(consumer)
            on_ready()
            last_partition_check = time.monotonic()
            while not self._stop.is_set():
                messages = consume_ready(consumer, _FETCH_BATCH, self.poll_timeout)
                if messages:
                    self._apply(messages)
                self.store.commit_if_due()  # applies share a transaction (KeyStore.apply): none stays open long
                now = time.monotonic()
                if now - last_partition_check > _PARTITION_CHECK_SECONDS:
                    last_partition_check = now
                    self._follow_new_partitions(consumer)
                self._on_tick()
        except BaseException as exc:  # noqa: BLE001 - recorded; every lookup now fails closed
            log.error("key table reader of %s stopped: %s", self.topic, exc)
            self.failure = exc
        finally:
            if consumer is not None:
                consumer.close()
            with self._progress:
                self._progress.notify_all()

    def _assign(self, consumer: Consumer) -> None:
        self.layout_partitions = self.store.layout_partitions()
        stored = self.store.next_offsets()
        if stored:
            ends = self.watermarks()
            if any(stored.get(p, 0) > high for p, (_, high) in ends.items()):
                log.warning("keys topic %s is shorter than the persistent store remembers: rebuilding", self.topic)
                self.store.reset()
                self._on_reset()
                stored = {}
        with self._progress:
            for p in range(self.partitions):
                self._applied[p] = stored.get(p, 0)
        consumer.assign(
            [TopicPartition(self.topic, p, stored.get(p, OFFSET_BEGINNING)) for p in range(self.partitions)]
        )

    def _follow_new_partitions(self, consumer: Consumer) -> None:
        try:
            current = KeysTopic(self.client, self.topic).partitions
        except StrongroomError:
            return
        if current > self.partitions:
            message = (
                f"keys topic {self.topic!r} grew from {self.partitions} to {current} partitions: "
                "subjects moved partitions, key ordering guarantees are void (never add partitions)"
            )
            log.error(message)
            self.problems.append(message)
            added = list(range(self.partitions, current))
            consumer.incremental_assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in added])
            with self._progress:
                for p in added:
                    self._applied[p] = 0
            self.partitions = current

    def _apply(self, messages: list[Any]) -> None:
        with collector_paused:  # a fetch's records and rows live until it is applied: nothing to collect
            batch, next_offsets = self._decode_batch(messages)
            with self._progress:
                next_offsets = {p: o for p, o in next_offsets.items() if o > self._applied.get(p, 0)}
            if not batch and not next_offsets:
                return
            effects = self.store.apply(batch, next_offsets)
        self._on_effects(effects)
        with self._progress:
            self._applied.update(next_offsets)
            self._progress.notify_all()

    def _decode_batch(self, messages: list[Any]) -> tuple[list[ApplyItem], dict[int, int]]:
        """The records of one fetch, decoded for :meth:`KeyStore.apply`, and the next offset per partition.

        Subject-key records (nearly all of a catch-up) are decoded straight into store rows and checked
        for their partition all at once (:func:`subject_partitions`); everything else goes through
        :meth:`_decode`.
        """
        batch: list[ApplyItem | None] = []
        next_offsets: dict[int, int] = {}
        applied = self._applied
        rows: list[int] = []  # positions in batch of subject-key rows (their partition is checked below)
        decoded = 0
        for msg in messages:
            partition = msg.partition()
            err = msg.error()
            if err is not None:
                if err.code() == RdKafkaError._PARTITION_EOF:
                    next_offsets[partition] = max(next_offsets.get(partition, 0), msg.offset())
                    self.eof.add(partition)
                elif err.fatal():
                    raise KeyTableClosed(f"reading keys topic {self.topic!r} failed: {err}")
                else:
                    log.warning("reading keys topic %s: %s (retrying)", self.topic, err)
                continue
            offset = msg.offset()
            if offset < applied.get(partition, 0):
                continue  # never apply an offset twice (a store that is ahead of a re-fetch)
            next_offsets[partition] = offset + 1
            decoded += 1
            key, value = msg.key(), msg.value()
            if value is not None and key is not None and key[:2] == records.SUBJECT_KEY_PREFIX:
                try:
                    batch.append(records.subject_key_row(key, value, partition, offset))
                except CorruptKeyRecord as exc:
                    self._skip_corrupt(partition, offset, key, exc)
                    continue
                rows.append(len(batch) - 1)
                continue
            if self.skip_leases and key is not None and key[:2] in _LEASE_PREFIXES:
                self.counters["leases_skipped"] += 1
                continue
            record = self._decode(partition, offset, key, value)
            if record is not None:
                batch.append((partition, offset, record))
        self.counters["records"] += decoded
        if rows:
            self._drop_misplaced(batch, rows)
        return [item for item in batch if item is not None], next_offsets

    def _drop_misplaced(self, batch: list[ApplyItem | None], rows: list[int]) -> None:
        """Replace the subject-key rows of ``batch`` that are not in their subject's partition by None."""
        partitions = self.layout_partitions or self.partitions
        subjects = [cast("SubjectKeyRow", batch[i])[1].encode("utf-8") for i in rows]
        for index, expected in zip(rows, subject_partitions(subjects, partitions), strict=True):
            row = cast("SubjectKeyRow", batch[index])
            if row[4] != expected:
                self._report_misplaced(row[4], row[5], expected)
                batch[index] = None

    def _report_misplaced(self, partition: int, offset: int, expected: int) -> None:
        self.counters["misplaced"] += 1
        problem = (
            f"ignored subject-key record {self.topic}/{partition}@{offset}: it is not in its subject's partition "
            f"{expected} (written by something other than strongroom; an erasure would never reach it)"
        )
        log.error(problem)
        self.problems.append(problem)

    def _skip_corrupt(self, partition: int, offset: int, key: bytes | None, exc: CorruptKeyRecord) -> None:
        self.counters["corrupt"] += 1
        problem = f"skipped keys record {self.topic}/{partition}@{offset}: {exc.problem}"
        log.warning("%s (%s)", problem, exc.hint)
        self.problems.append(problem)
        if key and key.startswith(records.WRAPPING_KEY_PREFIX) and len(key) == 2 + records.WK_ID_SIZE:
            self.corrupt_wks.add(key[2:])

    def _decode(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> KeysRecord | None:
        try:
            record = records.decode(key, value)
        except CorruptKeyRecord as exc:
            self._skip_corrupt(partition, offset, key, exc)
            return None
        if isinstance(record, ErasureMarker) and record.problem:
            problem = (
                f"erasure marker {self.topic}/{partition}@{offset} has an unreadable value "
                f"({record.problem}); applied anyway"
            )
            log.warning(problem)
            self.problems.append(problem)
        if isinstance(record, records.SubjectKeyRecord) and not self._placed_right(record.subject, partition):
            self._report_misplaced(
                partition, offset, subject_partition(record.subject, self.layout_partitions or self.partitions)
            )
            return None
        if isinstance(record, records.LayoutRecord):
            self.layout_partitions = record.partitions
        if isinstance(record, records.SubjectKeyTombstone):
            self.counters["tombstones"] += 1
        if isinstance(record, WrappingKeyRecord):
            self.corrupt_wks.discard(record.wk_id)
        return record

    def _placed_right(self, subject: str, partition: int) -> bool:
        """A subject's key records live in its partition (the keys topic's partitioner places them there):
        only there do erasure markers and "first key in partition order wins" see them in order."""
        return subject_partition(subject, self.layout_partitions or self.partitions) == partition
