"""What the pipelines do to each record, inside the executor task that writes it (the single pass).

The transactional sink hands every Arrow batch of source rows (coordinates, key, value, headers,
timestamp) to one of these transforms and writes what comes back. A transform asks the driver's key
service (:mod:`strongroom.spark.keyservice`) once per batch for the keys it needs, then seals or
opens each record with the same per-record core as the client library
(:class:`strongroom.clients.sealing.RuleCodec`), so Spark output and client output are byte-compatible
by construction. Each output row carries the pipeline's verdict (``status``, ``reason``) and whether
the policy says stop (``fatal``): the sink aborts that partition's transaction and fails the write.

Both classes are plain picklable objects built on the driver; codecs and the service client are made
lazily in the executor.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strongroom.clients.records import Header, NoSubject
from strongroom.clients.sealing import (
    SUBJECT_KEY_PREFIX,
    Erased,
    Failed,
    Opened,
    Passthrough,
    Pending,
    Rejected,
    RuleCodec,
    seal_record,
)
from strongroom.envelope.errors import IntegrityError, SubjectErased
from strongroom.envelope.ids import RECORD_HEADER_NAME, SUBJECT_KEY_ID_SIZE
from strongroom.envelope.json_fields import FieldDocument, may_hold_envelopes
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.errors import EnvelopeError, KeysError, PipelineError
from strongroom.policies import OnReject
from strongroom.rules import EncryptionRules, TopicRule
from strongroom.schemas.registry import RegistrySettings, SchemaRegistry
from strongroom.spark.keyservice import KeyServiceClient, b64, unb64
from strongroom.spark.transforms import KEY_FOREIGN

# Row statuses (the same words the DataFrame transforms use).
OK, PASSTHROUGH, DROPPED, REJECTED = "ok", "passthrough", "dropped", "rejected"
PENDING, ERASED, FAILED = "pending", "erased", "failed"

#: Output columns a transform returns, one value per input row.
OUT_COLUMNS = ("emit", "topic", "key", "value", "headers", "timestamp_ms", "status", "reason", "fatal")


def _empty_output(n: int) -> dict[str, list[Any]]:
    return {name: [None] * n for name in OUT_COLUMNS}


def _source(cols: Mapping[str, list[Any]], i: int) -> str:
    return f"{cols['src_topic'][i]}/{cols['src_partition'][i]}/{cols['src_offset'][i]}"


def _dead_letter(out: dict[str, list[Any]], cols: Mapping[str, list[Any]], i: int, reason: str, topic: str) -> None:
    """Row ``i`` goes unchanged to the dead-letter topic with the reason and its source coordinates."""
    out["emit"][i], out["topic"][i], out["value"][i] = True, topic, cols["value"][i]
    out["headers"][i] = [
        *cols["headers"][i],
        ("strongroom.dead-letter.reason", reason.encode()),
        ("strongroom.dead-letter.source", _source(cols, i).encode()),
    ]


@dataclass
class _Rules:
    """The rule and codec per topic (first match wins), cached in the executor."""

    rules: EncryptionRules
    encrypted_only: bool = False
    #: Schema-mode rules read their records' schemas from this registry (one client per executor task).
    schema_registry: RegistrySettings | None = None
    _by_topic: dict[str, tuple[TopicRule, RuleCodec, int]] = field(default_factory=dict)
    _registry: SchemaRegistry | None = None

    def __call__(self, topic: str) -> tuple[TopicRule, RuleCodec, int]:
        found = self._by_topic.get(topic)
        if found is None:
            rule = self.rules.rule_for(topic)
            if rule.mode == "schema" and self._registry is None and self.schema_registry is not None:
                self._registry = SchemaRegistry(self.schema_registry)
            codec = RuleCodec(rule, encrypted_only=self.encrypted_only, schema_registry=self._registry)
            found = self._by_topic[topic] = (rule, codec, self.rules.rules.index(rule))
        return found


def unexpected(cols: Mapping[str, list[Any]], i: int, exc: BaseException) -> str:
    """The reason of a record whose transform raised something that is not a strongroom error: a bug,
    never a property of the data the policies could route. The pipeline stops on it, naming the record."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"unexpected {type(exc).__name__} while processing record {_source(cols, i)}: {first} (a strongroom bug)"


@dataclass
class EncryptRows:
    """Seal every record of a batch with its subject's key; reject what cannot be sealed."""

    rules: EncryptionRules
    service: dict[str, Any]
    #: Usable value size per output topic (``max.message.bytes`` minus record headroom).
    limits: dict[str, int]
    dead_letter_topic: str | None = None
    #: Where schema-mode rules read their records' schemas (docs/schema-aware.md).
    schema_registry: RegistrySettings | None = None
    _codecs: _Rules | None = field(default=None, repr=False)
    _client: KeyServiceClient | None = field(default=None, repr=False)

    def __call__(self, cols: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
        if self._codecs is None:
            self._codecs = _Rules(self.rules, schema_registry=self.schema_registry)
            self._client = KeyServiceClient(self.service)
        n = len(cols["src_offset"])
        out = _empty_output(n)
        subjects: list[str | None] = [None] * n
        seals = [0] * n
        reasons: list[str | None] = [None] * n
        for i in range(n):
            rule, codec, _ = self._codecs(cols["src_topic"][i])
            if cols["value"][i] is None:
                continue
            try:
                subject = codec.subject(cols["key"][i], cols["value"][i], cols["headers"][i])
                if not isinstance(subject, NoSubject):
                    seals[i] = codec.seal_count(cols["value"][i])
            except Exception as exc:  # noqa: BLE001 - a bug, not the record's fault: stop, naming the record
                raise PipelineError(unexpected(cols, i, exc)) from None
            if isinstance(subject, NoSubject):
                reasons[i] = subject.reason
            else:
                subjects[i] = subject
        keys = self._keys(cols["src_topic"], subjects, seals)
        for i in range(n):
            rule, codec, _ = self._codecs(cols["src_topic"][i])
            out_topic = rule.output_for(cols["src_topic"][i])
            value, headers = cols["value"][i], cols["headers"][i]
            out["key"][i], out["timestamp_ms"][i], out["topic"][i] = cols["key"][i], cols["timestamp_ms"][i], out_topic
            out["fatal"][i] = False
            reason = reasons[i]
            if value is None and reason is None:
                out["emit"][i], out["status"][i], out["headers"][i] = True, PASSTHROUGH, headers
                continue
            if reason is None:
                subject_text = subjects[i]
                assert subject_text is not None
                key = keys[(cols["src_topic"][i], subject_text)]
                limit = self.limits.get(out_topic, 1_000_000 - 1024)
                try:
                    result = seal_record(codec, value, headers, out_topic, subject_text, key, limit)
                except Exception as exc:  # noqa: BLE001 - not a property of the record: stop, naming it
                    out["status"][i], out["reason"][i], out["emit"][i], out["fatal"][i] = (
                        REJECTED, unexpected(cols, i, exc), False, True
                    )  # fmt: skip
                    continue
                if result is None:
                    out["emit"][i], out["status"][i] = False, DROPPED
                    continue
                if isinstance(result, Rejected):
                    reason = result.reason
                else:
                    out["emit"][i], out["status"][i] = True, OK
                    out["value"][i], out["headers"][i] = result.value, result.headers
                    continue
            self._reject(out, cols, i, rule, reason)
        return out

    def _keys(
        self, topics: list[str], subjects: list[str | None], seals: list[int]
    ) -> dict[tuple[str, str], tuple[bytes, bytes] | None]:
        """The driver's keys for the batch's subjects: one request per source topic (its rule's KEK wraps
        them), with how many seals each key makes here: one per sealed value, charged to its usage limit
        (strongroom.keys.usage)."""
        by_topic: dict[str, Counter[str]] = {}
        for topic, subject, count in zip(topics, subjects, seals, strict=True):
            if subject is not None:
                by_topic.setdefault(topic, Counter())[subject] += count
        assert self._client is not None
        keys: dict[tuple[str, str], tuple[bytes, bytes] | None] = {}
        for topic, counts in by_topic.items():
            wanted = sorted(counts)
            answer = self._client.call("encrypt_keys", topic=topic, subjects=wanted, seals=[counts[s] for s in wanted])
            for subject, (kid, dek, emit) in answer.items():
                keys[(topic, subject)] = (unb64(kid), unb64(dek)) if emit else None
        self._client.remember([key for key in keys.values() if key is not None])
        return keys

    def _reject(self, out: dict[str, list[Any]], cols: Mapping[str, list[Any]], i: int, rule: TopicRule,
                reason: str) -> None:  # fmt: skip
        out["status"][i], out["reason"][i] = REJECTED, reason
        if rule.on_reject == OnReject.DEAD_LETTER and self.dead_letter_topic:
            _dead_letter(out, cols, i, reason, self.dead_letter_topic)
        else:
            out["emit"][i], out["fatal"][i] = False, True


class ForeignKey(IntegrityError):
    """The record names a subject whose key it was not sealed with: moved or forged."""

    default_hint = "quarantine the record and check who can write to the topic"


class _Lost(KeysError):
    """The service says this key cannot be unwrapped (lost or disabled KEK)."""


@dataclass
class DecryptRows:
    """Open every record of a batch with the keys the driver resolves; route what cannot be opened."""

    rules: EncryptionRules
    service: dict[str, Any]
    output_topic: str  # template: $(topic), $(base)
    on_failure: str  # fail | dead-letter | skip
    erased: str  # drop | mark
    pending_topic: str
    topic_map: dict[str, str] = field(default_factory=dict)
    dead_letter_topic: str | None = None
    #: Records without the marker header fail (docs/threat-model.md, downgrade); False passes them on.
    encrypted_only: bool = True
    #: Where schema-mode rules read their records' schemas (docs/schema-aware.md).
    schema_registry: RegistrySettings | None = None
    _codecs: _Rules | None = field(default=None, repr=False)
    _client: KeyServiceClient | None = field(default=None, repr=False)

    def output_for(self, topic: str) -> str:
        base = topic[:-4] if topic.endswith(".enc") else topic
        return self.output_topic.replace("$(base)", base).replace("$(topic)", topic)

    def __call__(self, cols: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
        """One Arrow batch: ask the driver for every key the batch needs in one request, then open each record."""
        if self._codecs is None:
            self._codecs = _Rules(self.rules, self.encrypted_only, self.schema_registry)
            self._client = KeyServiceClient(self.service)
        states = self._key_states(self._key_requests(cols, self._codecs))
        return self._open_rows(cols, self._codecs, _state_lookup(states))

    def _key_requests(self, cols: Mapping[str, list[Any]], codecs: _Rules) -> dict[tuple[str, str], None]:
        """Every ``(key id, subject)`` the batch's records were sealed under, once, in order (no decryption)."""
        requests: dict[tuple[str, str], None] = {}
        for i in range(len(cols["src_offset"])):
            _, codec, _ = codecs(cols["src_topic"][i])
            value = cols["value"][i]
            try:
                key_ids = _key_ids(value, codec) if value is not None else []
                subject = codec.subject(cols["key"][i], value, cols["headers"][i]) if key_ids else None
            except Exception as exc:  # noqa: BLE001 - a bug, not the record's fault: stop, naming the record
                raise PipelineError(unexpected(cols, i, exc)) from None
            if isinstance(subject, str):
                for key_id in key_ids:  # every key the record needs, not only its first field's
                    requests[(b64(key_id), subject)] = None
        return requests

    def _key_states(self, requests: dict[tuple[str, str], None]) -> dict[tuple[bytes, str], _KeyState]:
        """The driver's answer per requested key: ``(state, DEK or None, reason or None)``."""
        assert self._client is not None
        answers = self._client.call("decrypt_keys", pairs=[list(p) for p in requests]) if requests else {}
        states: dict[tuple[bytes, str], _KeyState] = {}
        for (kid, subject), (state, dek, reason) in zip(requests, answers, strict=True):
            states[(unb64(kid), subject)] = (state, unb64(dek) if dek else None, reason)
        self._client.remember([(kid, dek) for (kid, _), (_, dek, _) in states.items() if dek is not None])
        return states

    def _open_rows(self, cols: Mapping[str, list[Any]], codecs: _Rules, lookup: Any) -> dict[str, list[Any]]:
        """Open every record with the looked-up keys and route it by its outcome."""
        n = len(cols["src_offset"])
        out = _empty_output(n)
        now = str(int(time.time() * 1000)).encode()
        for i in range(n):
            topic, key, value = cols["src_topic"][i], cols["key"][i], cols["value"][i]
            _, codec, index = codecs(topic)
            bound = self.topic_map.get(topic, topic)
            out["key"][i], out["timestamp_ms"][i], out["fatal"][i] = key, cols["timestamp_ms"][i], False
            out["topic"][i] = self.output_for(topic)
            try:
                outcome: Any = codec.open(key, value, cols["headers"][i], bound, lookup)
            except Exception as exc:  # noqa: BLE001 - not a property of the record: stop, naming it
                out["status"][i], out["reason"][i], out["emit"][i], out["fatal"][i] = (
                    FAILED, unexpected(cols, i, exc), False, True
                )  # fmt: skip
                continue
            self._route(out, cols, i, outcome, now, index)
        return out

    def _route(self, out: dict[str, list[Any]], cols: Mapping[str, list[Any]], i: int, outcome: Any, now: bytes,
               index: int) -> None:  # fmt: skip
        """Where an opened record goes: the output, the pending topic, the erased policy or the failure policy."""
        value, headers = cols["value"][i], cols["headers"][i]
        if isinstance(outcome, Opened):
            out["emit"][i], out["status"][i], out["value"][i], out["headers"][i] = (
                True,
                OK,
                outcome.value,
                outcome.headers,
            )
        elif isinstance(outcome, Passthrough):
            out["emit"][i], out["status"][i], out["value"][i] = True, PASSTHROUGH, value
            out["headers"][i] = [h for h in headers if h[0] != RECORD_HEADER_NAME]
        elif isinstance(outcome, Erased):
            out["status"][i] = ERASED
            if self.erased == "mark":
                kept = [h for h in headers if h[0] != RECORD_HEADER_NAME]
                out["emit"][i], out["headers"][i] = True, [*kept, ("strongroom.erased", b"1")]
            else:
                out["emit"][i] = False
        elif isinstance(outcome, Pending):
            out["emit"][i], out["status"][i], out["topic"][i], out["value"][i] = (
                True,
                PENDING,
                self.pending_topic,
                value,
            )
            out["headers"][i] = [*headers, *_pending_headers(outcome.subject, _source(cols, i), now,
                                                              cols["timestamp_ms"][i], index)]  # fmt: skip
        else:
            self._fail(out, cols, i, _failure_reason(outcome))

    def _fail(self, out: dict[str, list[Any]], cols: Mapping[str, list[Any]], i: int, reason: str) -> None:
        out["status"][i], out["reason"][i] = FAILED, reason
        if self.on_failure == "dead-letter" and self.dead_letter_topic:
            _dead_letter(out, cols, i, reason, self.dead_letter_topic)
        elif self.on_failure == "fail":
            out["emit"][i], out["fatal"][i] = False, True
        else:
            out["emit"][i] = False  # skip: counted, offset advances


#: The driver's answer for one key: state (available, erased, lost, pending, foreign), DEK, reason.
_KeyState = tuple[str, bytes | None, str | None]


def _state_lookup(states: Mapping[tuple[bytes, str], _KeyState]) -> Any:
    """The key lookup records are opened with: a DEK, None while the key is pending, or the error its state means."""

    def lookup(key_ref: Any, subject: str) -> bytes | None:
        state, dek, reason = states.get((key_ref.key_id, subject), ("pending", None, None))
        if state == "erased":
            raise SubjectErased(f"subject key {key_ref.key_id.hex()} was erased")
        if state == "lost":
            raise _Lost(reason or f"subject key {key_ref.key_id.hex()} cannot be unwrapped")
        if state == KEY_FOREIGN:
            raise ForeignKey(reason or f"key {key_ref.key_id.hex()} belongs to another subject")
        return dek if state == "available" else None

    return lookup


def _failure_reason(outcome: Any) -> str:
    if isinstance(outcome, Failed):
        # a lost key's reason comes from the driver as is ("subject key … cannot be unwrapped: …")
        return outcome.error.problem if isinstance(outcome.error, _Lost) else outcome.reason
    return f"the KMS is unavailable: {outcome.error.problem}"


def _key_ids(value: bytes, codec: RuleCodec) -> list[bytes]:
    """Every subject key id a value was sealed under, without decrypting (empty: no envelope found).

    Field mode reads the parsed document (the rule's fields only, so an escaped ``sr1:`` spelling is not
    missed); a document that cannot be read needs no key: opening it fails with the precise reason.
    """
    if codec.schema is not None:
        try:
            refs = codec.schema.key_refs(value, sealed_only=True)  # a plaintext field fails when opened
            return [ref.key_id for ref in refs if isinstance(ref, SubjectKeyRef)]
        except EnvelopeError:
            return []
    if codec.fields is None:
        if value[:4] == SUBJECT_KEY_PREFIX and len(value) >= 4 + SUBJECT_KEY_ID_SIZE:
            return [value[4 : 4 + SUBJECT_KEY_ID_SIZE]]
        return []
    if not may_hold_envelopes(value):
        return []
    try:
        document = FieldDocument(value, codec.fields)
    except EnvelopeError:
        return []
    return [ref.key_id for ref in document.key_refs() if isinstance(ref, SubjectKeyRef)]


def _pending_headers(subject: str, source: str, since: bytes, timestamp_ms: int | None, rule: int) -> list[Header]:
    from strongroom.spark.jobs.pending import H_RULE, H_SINCE, H_SOURCE, H_SUBJECT, H_TIMESTAMP

    return [
        (H_SUBJECT, subject.encode()),
        (H_SOURCE, source.encode()),
        (H_SINCE, since),
        (H_TIMESTAMP, str(timestamp_ms).encode() if timestamp_ms is not None else b""),
        (H_RULE, str(rule).encode()),
    ]
