"""The encrypting producer: produce plaintext, Kafka receives exactly what the Spark encrypt pipeline writes.

``EncryptingProducer.produce("customer-events", value, key=...)`` applies the rule for
``customer-events`` (the same :class:`~strongroom.rules.EncryptionRules` a Spark pipeline uses) and
produces the sealed record to the rule's output topic (``customer-events.enc``), bound to that topic
and the record's subject, with the ``strongroom.enc`` marker header first and the caller's headers,
key and timestamp unchanged. Tombstones pass through unencrypted so compaction keeps working.

Keys: each subject's key comes from :class:`~strongroom.keys.KeyManager`, which makes a new key
durable in the keys topic **before** returning it — so no record can reach Kafka ahead of its key.
A small local cache (subject → key, bounded, with a TTL, flushed whenever the key table applies an
erasure marker) keeps the hot path off the key table; :meth:`EncryptingProducer.produce_batch` asks
the key manager once for all uncached subjects of a batch (one flush of the keys topic per batch).

A record that cannot be encrypted (no subject, not a JSON object in field mode, too large for the
output topic) is never sent in plaintext: ``produce`` raises :class:`RecordRejected` naming the topic,
a fingerprint of the key and the reason — or, when the rule says ``on_reject: dead-letter`` and a
dead-letter topic is configured, the record goes there unchanged with a
``strongroom.dead-letter.reason`` header. A batch is checked completely before any record is sent.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, cast

from confluent_kafka import KafkaException

from strongroom.clients.batch_seal import ENVELOPE_OVERHEAD, SealItem, SubjectSealers
from strongroom.clients.errors import ClientClosed, DeliveryFailed, RecordRejected
from strongroom.clients.records import (
    DEAD_LETTER_REASON,
    DEAD_LETTER_SOURCE,
    Header,
    HeadersIn,
    NoSubject,
    key_fingerprint,
    normalize_headers,
)
from strongroom.clients.sealing import Rejected, RuleCodec, seal_record
from strongroom.envelope.ids import AadProfile
from strongroom.envelope.json_fields import native_members
from strongroom.errors import EnvelopeError
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.kafka.topics import TopicLimits
from strongroom.kafka.transport import build_producer, rdkafka_error
from strongroom.keys.cache import KeyCache
from strongroom.keys.manager import KeyManager, KeyOrDecision, PolicyDecision
from strongroom.keys.records import MAX_SUBJECT_BYTES
from strongroom.keys.router import KeyRouter
from strongroom.keys.table import SubjectKey
from strongroom.metrics import RecordSample, metrics_for
from strongroom.policies import OnReject
from strongroom.rules import EncryptionRules
from strongroom.schemas.registry import SchemaRegistry

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Any, Any], None]

_MAX_DELIVERY_ERRORS: Final = 20
#: Default ``transaction.timeout.ms`` of a transactional producer (the Spark exactly-once sink uses the same).
TRANSACTION_TIMEOUT_MS: Final = 600_000


class ProduceOutcome(StrEnum):
    """What :meth:`EncryptingProducer.produce` did with a record."""

    ENCRYPTED = "encrypted"
    #: A tombstone (null value): produced to the output topic unencrypted, headers unchanged.
    PASSTHROUGH = "passthrough"
    #: The subject is erased and the key manager's post-erasure policy is ``drop``.
    DROPPED = "dropped"
    #: Rejected and sent, unchanged, to the dead-letter topic.
    DEAD_LETTERED = "dead-lettered"


@dataclass(frozen=True)
class ProducerRecord:
    """One record for :meth:`EncryptingProducer.produce_batch` (the arguments of ``produce``)."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: HeadersIn = None
    timestamp: int | None = None
    partition: int | None = None
    on_delivery: DeliveryCallback | None = None


@dataclass(frozen=True, slots=True)
class _SimpleTarget:
    """How the batch path writes a source topic's records."""

    out_topic: str
    profile: AadProfile
    #: The largest plaintext value the batch path takes (whole value: whose envelope still fits).
    limit: int
    #: The output topic's own limit (field mode checks the sealed document against it).
    topic_limit: int
    codec: RuleCodec
    #: The marker header, the only header of a record on the batch path (as confluent-kafka types it).
    headers: list[tuple[str, str | bytes | None]]


@dataclass(slots=True)
class _Plan:
    """A record after checking and sealing, before it is handed to librdkafka."""

    index: int
    record: ProducerRecord
    headers: list[Header]
    out_topic: str
    codec: RuleCodec | None = None
    subject: str | None = None
    outcome: ProduceOutcome = ProduceOutcome.ENCRYPTED
    value: bytes | None = None
    reason: str | None = None


class EncryptingProducer:
    """A confluent-kafka producer that encrypts per topic rule. Thread-safe like the producer it wraps.

    ``key_manager`` is the caller's (share one per process); :meth:`close` does not close it. A
    :class:`~strongroom.keys.router.KeyRouter` gives each topic the KEK its rule names (docs/shredding.md).
    ``transactional_id`` turns on Kafka transactions (:meth:`begin_transaction` / :meth:`commit_transaction`);
    keys are durable before any record of the transaction is even produced.
    """

    def __init__(
        self,
        client_config: ClientConfig,
        rules: EncryptionRules,
        key_manager: KeyManager | KeyRouter,
        *,
        producer_overrides: Mapping[str, Any] | None = None,
        dead_letter_topic: str | None = None,
        transactional_id: str | None = None,
        create_topics: bool = True,
        key_cache_size: int = 100_000,
        key_cache_ttl_s: float = 30.0,
        kms_outage_wait_s: float = 60.0,
        registry: CollectorRegistry | None = None,
        schema_registry: SchemaRegistry | None = None,
    ) -> None:
        self.client_config = client_config
        #: For schema-mode rules (docs/schema-aware.md); waits out a registry outage, never guesses.
        self.schema_registry = schema_registry
        self.rules = rules
        self.keys = key_manager
        self.dead_letter_topic = dead_letter_topic
        self.transactional_id = transactional_id
        self.kms_outage_wait_s = kms_outage_wait_s
        conf = client_config.producer(producer_overrides)
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
            # librdkafka needs socket.timeout.ms <= transaction.timeout.ms + 100; the resilient socket
            # timeout is 90 s, so transactions get the same long timeout as the Spark sink's.
            conf.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        self.config = conf
        self._topics = TopicLimits.for_producer(client_config, conf, create=create_topics)
        self._producer = build_producer(conf)
        self._codecs: dict[str, tuple[RuleCodec, str]] = {}
        if isinstance(key_manager, KeyRouter):
            self._keys = key_manager
        else:
            cache = KeyCache(key_manager, capacity=key_cache_size, ttl_s=key_cache_ttl_s)
            self._keys = KeyRouter.single(key_manager, cache)
        #: The batch path's per-subject precomputation (:mod:`strongroom.clients.batch_seal`).
        self._sealers = SubjectSealers(max(key_cache_size, 1))
        key_manager.table.add_erasure_listener(self._sealers.on_erasure)
        #: source topic → (output topic, AAD profile, value limit, marker headers), or None when its
        #: records always take the per-record path (field mode, subject not in the key).
        self._simple_targets: dict[str, _SimpleTarget | None] = {}
        self._lock = threading.Lock()
        self._delivery_errors: list[str] = []
        self._closed = False
        self.counters: dict[str, int] = {
            "encrypted": 0,
            "passthrough": 0,
            "dropped": 0,
            "dead_lettered": 0,
            "rejected": 0,
            "delivered": 0,
            "delivery_failed": 0,
        }
        if transactional_id is not None:
            self._producer.init_transactions()
        if registry is not None:  # Prometheus (docs/metrics.md): read from self.counters at each scrape
            metrics_for(registry).watch_records("producer", self.record_sample)

    # ------------------------------------------------------------------ producing
    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: HeadersIn = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
        partition: int | None = None,
    ) -> ProduceOutcome:
        """Encrypt one record per the rule for ``topic`` and produce it to the rule's output topic."""
        record = ProducerRecord(topic, value, key, headers, timestamp, partition, on_delivery)
        return self.produce_batch([record])[0]

    def produce_batch(self, records: Iterable[ProducerRecord]) -> list[ProduceOutcome]:
        """Encrypt and produce many records: one key-manager call for every new subject among them.

        Every record is checked and sealed first; if one is rejected (and not dead-lettered) nothing of
        the batch is produced and :class:`RecordRejected` names it.
        """
        self._check_open()
        batch = list(records)
        fast = self._produce_simple(batch)
        if fast is not None:
            return fast
        plans = self._plan(batch)
        for plan in plans:
            self._send(plan)
        self._producer.poll(0)
        return [plan.outcome for plan in plans]

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks (as confluent-kafka's ``Producer.poll``)."""
        return int(self._producer.poll(timeout))

    def flush(self, timeout: float | None = None) -> int:
        """Wait for every record to be delivered; the number still in the queue when ``timeout`` ran out.

        Raises :class:`DeliveryFailed` when records without an ``on_delivery`` callback failed.
        """
        remaining = int(self._producer.flush(-1 if timeout is None else timeout))
        self._raise_delivery_errors()
        return remaining

    def close(self, timeout: float = 30.0) -> None:
        """Flush and release the producer (the key manager stays open: it is the caller's)."""
        if self._closed:
            return
        self._closed = True
        try:
            remaining = int(self._producer.flush(timeout))
        finally:
            self._producer = None  # type: ignore[assignment]
        self._raise_delivery_errors()
        if remaining:
            raise DeliveryFailed(f"{remaining} records were still undelivered when close() gave up after {timeout}s")

    def __enter__(self) -> EncryptingProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transactions
    def begin_transaction(self) -> None:
        self._check_open()
        self._producer.begin_transaction()

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Commit (flushes first); :class:`DeliveryFailed` if a record of it could not be delivered."""
        self._check_open()
        self._producer.flush(-1 if timeout is None else timeout)
        self._raise_delivery_errors()
        self._producer.commit_transaction(*(() if timeout is None else (timeout,)))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._check_open()
        self._producer.abort_transaction(*(() if timeout is None else (timeout,)))
        with self._lock:
            self._delivery_errors.clear()

    def send_offsets_to_transaction(
        self, offsets: Sequence[Any], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Consume-transform-produce: commit the input offsets with the encrypted output."""
        self._check_open()
        self._producer.send_offsets_to_transaction(
            list(offsets), group_metadata, *(() if timeout is None else (timeout,))
        )

    # ------------------------------------------------------------------ observability
    def stats(self) -> dict[str, Any]:
        with self._lock:
            counters = dict(self.counters)
        caches = self._keys.caches
        total = {name: sum(cache.counters[name] for cache in caches) for name in ("manager_calls", "hits", "misses")}
        return {**counters, "key_batches": total["manager_calls"], "key_cache_hits": total["hits"],
                "key_cache_misses": total["misses"], "key_cache_size": sum(len(cache) for cache in caches),
                "key_manager": self._manager_stats()}  # fmt: skip

    def _manager_stats(self) -> dict[str, Any]:
        managers = [cache.manager for cache in self._keys.caches]
        if len(managers) == 1:
            return managers[0].stats()
        return {"routes": {f"{m.kms.name}:{m.kek_alias}": m.stats() for m in managers}}

    # ------------------------------------------------------------------ internals
    def record_sample(self) -> RecordSample:
        """The counters in the metrics' words (``encrypted`` is ``sealed``; delivery is not an outcome)."""
        counts = dict(self.counters)
        dead = counts.pop("dead_lettered")
        counts.pop("delivered"), counts.pop("delivery_failed")
        outcomes = {"sealed" if name == "encrypted" else name: n for name, n in counts.items()}
        outcomes["rejected"] += dead  # counted once, under rejected; dead_lettered says where they went
        return RecordSample(outcomes, dead_lettered=dead)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("the encrypting producer is closed")

    def _codec_for(self, topic: str) -> tuple[RuleCodec, str]:
        entry = self._codecs.get(topic)
        if entry is None:
            rule = self.rules.rule_for(topic)  # ConfigError naming the topic when no rule matches
            codec = RuleCodec(rule, schema_registry=self.schema_registry)
            entry = self._codecs[topic] = (codec, rule.output_for(topic))
        return entry

    # ------------------------------------------------------------------ the batch path
    def _produce_simple(self, batch: list[ProducerRecord]) -> list[ProduceOutcome] | None:
        """Seal and produce a batch whose every record is simple (subject in the key, no caller headers,
        an existing key, one mode, fits the topic): per-subject work once, one pass per step. None when
        a record needs the per-record path (:meth:`_plan`), decided before anything is produced."""
        items = self._simple_items(batch)
        if items is None:
            return None
        topics = {record.topic for record in batch}
        if len(topics) > 1 and len({self._keys.route_for(topic) for topic in topics}) > 1:
            return None  # subjects of topics under different KEKs: the per-record path asks per topic
        notices = self._sealers.notices()
        keys = self._keys.get_or_create(
            [item.subject for item in items],
            topic=batch[0].topic,
            seals=self._simple_seals(batch, items),
            kms_wait_s=self.kms_outage_wait_s,
        )
        if any(type(key) is not SubjectKey for key in keys.values()):
            return None  # a post-erasure decision: the per-record path applies the policy
        ready = cast("dict[str, SubjectKey]", keys)
        first = self._simple_targets[batch[0].topic]
        assert first is not None
        if first.codec.fields is None:
            values: list[bytes] | None = self._sealers.seal(items, ready, notices)
        else:
            values = self._seal_fields(batch, items, ready, notices)
        if values is None:
            return None
        with self._lock:
            self.counters["encrypted"] += len(batch)
        self._send_simple(batch, values)
        self._producer.poll(0)
        return [ProduceOutcome.ENCRYPTED] * len(batch)

    def _simple_items(self, batch: list[ProducerRecord]) -> list[SealItem] | None:
        items: list[SealItem] = []
        append = items.append
        targets = self._simple_targets
        mode = None
        for record in batch:
            topic, key, value = record.topic, record.key, record.value
            target = targets[topic] if topic in targets else self._simple_target(topic)
            if target is None or value is None or record.headers or not key or len(key) > MAX_SUBJECT_BYTES:
                return None
            if len(value) > target.limit or (mode is not None and target.codec.mode != mode):
                return None
            mode = target.codec.mode
            try:
                subject = key.decode("utf-8")
            except UnicodeDecodeError:
                return None
            append(SealItem(target.out_topic, target.profile, subject, key, value))
        return items

    def _simple_seals(self, batch: list[ProducerRecord], items: list[SealItem]) -> Counter[str]:
        """How many seals each subject's key makes for the batch (charged to its usage limit): one per
        record sealed whole, one per selected value in field mode."""
        targets = self._simple_targets
        first = targets[batch[0].topic]
        assert first is not None
        if first.codec.fields is None:
            return Counter(item.subject for item in items)
        seals: Counter[str] = Counter()
        for record, item in zip(batch, items, strict=True):
            target = targets[record.topic]
            assert target is not None
            seals[item.subject] += target.codec.seal_count(item.value)
        return seals

    def _simple_target(self, topic: str) -> _SimpleTarget | None:
        codec, out_topic = self._codec_for(topic)
        target = None
        if codec.rule.subject.source == "key" and codec.schema is None:  # schema mode: the per-record path
            topic_limit = self._topics.max_value_bytes(out_topic, topic)
            limit = topic_limit if codec.fields is not None else topic_limit - ENVELOPE_OVERHEAD
            target = _SimpleTarget(out_topic, codec.profile, limit, topic_limit, codec, [codec.marker])
        self._simple_targets[topic] = target
        return target

    def _seal_fields(
        self, batch: list[ProducerRecord], items: list[SealItem], keys: dict[str, SubjectKey], notices: int
    ) -> list[bytes] | None:
        """Field mode: each record's fields sealed with its subject's key (top-level rule fields in one native call,
        :meth:`SubjectSealers.seal_fields`; any other record through its codec); None when one cannot be (the
        per-record path then rejects or dead-letters it with the reason)."""
        targets = self._simple_targets
        codecs = [cast("_SimpleTarget", targets[record.topic]).codec for record in batch]
        natively = self._sealers.seal_fields(
            items, [None if c.fields is None else native_members(c.fields) for c in codecs], keys, notices
        )
        values: list[bytes] = []
        for record, item, codec, sealed in zip(batch, items, codecs, natively, strict=True):
            if sealed is None:
                key = keys[item.subject]
                try:
                    sealed = codec.seal_value(item.value, item.out_topic, item.subject, key.key_id, key.key)
                except EnvelopeError:
                    return None
            if len(sealed) > cast("_SimpleTarget", targets[record.topic]).topic_limit:
                return None
            values.append(sealed)
        return values

    def _send_simple(self, batch: list[ProducerRecord], values: list[bytes]) -> None:
        produce = self._producer.produce
        delivered = self._delivered
        for index, record in enumerate(batch):
            target = self._simple_targets[record.topic]
            assert target is not None
            out_topic = target.out_topic
            if record.on_delivery is None and record.timestamp is None and record.partition is None:
                try:
                    produce(out_topic, values[index], record.key, on_delivery=delivered, headers=target.headers)
                    continue
                except (BufferError, KafkaException):
                    pass  # the general call below waits for room or names the error
            plan = _Plan(index, record, [self._codec_for(record.topic)[0].marker], out_topic, value=values[index])
            self._produce_plan(plan)

    # ------------------------------------------------------------------ the per-record path
    def _plan(self, records: list[ProducerRecord]) -> list[_Plan]:
        plans: list[_Plan] = []
        wanted: dict[str, list[str]] = {}  # per source topic: its rule's KEK wraps the keys
        seals: Counter[tuple[str, str]] = Counter()  # what each key's usage limit is charged
        for index, record in enumerate(records):
            codec, out_topic = self._codec_for(record.topic)
            plan = _Plan(index, record, normalize_headers(record.headers), out_topic, codec)
            plans.append(plan)
            if record.value is None:
                plan.outcome = ProduceOutcome.PASSTHROUGH
                continue
            subject = codec.subject(record.key, record.value, plan.headers)
            if isinstance(subject, NoSubject):
                plan.reason = subject.reason
            else:
                plan.subject = subject
                wanted.setdefault(record.topic, []).append(subject)
                seals[(record.topic, subject)] += codec.seal_count(record.value)
        keys = (
            self._keys.get_or_create_by_topic(wanted, seals=seals, kms_wait_s=self.kms_outage_wait_s) if wanted else {}
        )
        for plan in plans:
            if plan.outcome is ProduceOutcome.ENCRYPTED and plan.reason is None:
                self._seal(plan, keys[(plan.record.topic, plan.subject or "")])
        rejected = [p for p in plans if p.reason is not None]
        if rejected:
            self._divert(rejected, len(plans))
        return plans

    def _seal(self, plan: _Plan, decided: KeyOrDecision) -> None:
        assert plan.codec is not None
        assert plan.subject is not None
        assert plan.record.value is not None
        if isinstance(decided, PolicyDecision):
            # the never-stored key of the post-erasure policy (readable by nobody), or a drop
            key = None if decided.drop or decided.key is None else (decided.key.key_id, decided.key.key)
        else:
            key = (decided.key_id, decided.key)
        limit = self._topics.max_value_bytes(plan.out_topic, plan.record.topic)
        result = seal_record(plan.codec, plan.record.value, plan.headers, plan.out_topic, plan.subject, key, limit)
        if result is None:
            plan.outcome = ProduceOutcome.DROPPED
        elif isinstance(result, Rejected):
            plan.reason = result.reason
        else:
            plan.value = result.value
            plan.headers = result.headers

    def _divert(self, rejected: list[_Plan], batch_size: int) -> None:
        """Dead-letter the rejected records the rules allow to, or raise for the first that must fail."""
        for plan in rejected:
            assert plan.codec is not None
            assert plan.reason is not None
            if plan.codec.rule.on_reject == OnReject.DEAD_LETTER and self.dead_letter_topic:
                continue
            with self._lock:
                self.counters["rejected"] += 1
            where = (
                "" if batch_size == 1 else f" (record {plan.index + 1} of a batch of {batch_size}; none was produced)"
            )
            hint = None
            if plan.codec.rule.on_reject == OnReject.DEAD_LETTER:
                hint = "the rule says dead-letter but the producer has no dead_letter_topic: pass one"
            raise RecordRejected(
                f"cannot encrypt record for topic {plan.record.topic!r} ({key_fingerprint(plan.record.key)})"
                f"{where}: {plan.reason}",
                topic=plan.record.topic,
                reason=plan.reason,
                hint=hint,
            )
        assert self.dead_letter_topic is not None
        self._topics.max_value_bytes(self.dead_letter_topic, None)  # exists (or is created) before use
        for plan in rejected:
            assert plan.reason is not None
            plan.outcome = ProduceOutcome.DEAD_LETTERED
            plan.out_topic = self.dead_letter_topic
            plan.value = plan.record.value
            plan.headers = [
                *plan.headers,
                (DEAD_LETTER_REASON, plan.reason.encode("utf-8")),
                (DEAD_LETTER_SOURCE, plan.record.topic.encode("utf-8")),
            ]

    def _send(self, plan: _Plan) -> None:
        with self._lock:
            self.counters[plan.outcome.value.replace("-", "_")] += 1
        if plan.outcome is ProduceOutcome.DROPPED:
            return
        self._produce_plan(plan)

    def _produce_plan(self, plan: _Plan) -> None:
        record = plan.record
        kwargs: dict[str, Any] = {"key": record.key, "on_delivery": self._delivery_callback(record.on_delivery)}
        kwargs["value"] = record.value if plan.outcome is ProduceOutcome.PASSTHROUGH else plan.value
        if plan.headers:
            kwargs["headers"] = plan.headers
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        if record.partition is not None:
            kwargs["partition"] = record.partition
        try:
            produce_when_room(self._producer, plan.out_topic, **kwargs)
        except KafkaException as exc:  # e.g. larger than message.max.bytes, unknown partition
            raise DeliveryFailed(
                f"cannot produce record {plan.index + 1} to {plan.out_topic!r}: {rdkafka_error(exc)}",
                hint="the records before it in this call were produced; fix this one and produce it again",
            ) from None

    def _delivery_callback(self, user: DeliveryCallback | None) -> DeliveryCallback:
        if user is None:
            return self._delivered

        def delivered(err: Any, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.counters["delivered"] += 1
                else:
                    self.counters["delivery_failed"] += 1
            user(err, msg)

        return delivered

    def _delivered(self, err: Any, msg: Any) -> None:
        """Delivery report of a record produced without the caller's own callback."""
        with self._lock:
            if err is None:
                self.counters["delivered"] += 1
                return
            self.counters["delivery_failed"] += 1
            if len(self._delivery_errors) < _MAX_DELIVERY_ERRORS:
                self._delivery_errors.append(f"{msg.topic()}: {err}")

    def _raise_delivery_errors(self) -> None:
        with self._lock:
            errors, self._delivery_errors = self._delivery_errors, []
        if errors:
            raise DeliveryFailed(
                f"{len(errors)}{'+' if len(errors) >= _MAX_DELIVERY_ERRORS else ''} records could not be "
                f"delivered; first: {errors[0]}"
            )
