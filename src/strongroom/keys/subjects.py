"""Who a record is about: the data subject, from the record key, a JSON path in the value, or a header.

Configured per topic. A record without a subject follows a :class:`MissingSubjectPolicy`: ``error``
(the default: stop and name topic/partition/offset — silently passing personal data unencrypted is the
worst outcome), ``skip`` or ``dead-letter`` (the pipelines implement both; this module only decides).

In JSON field mode the subject field must not itself be an encrypted field: the reader needs the
subject to find the key.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strongroom.envelope.errors import NotJson
from strongroom.envelope.json_fields import load_json_object
from strongroom.envelope.jsonpath import WILDCARD, FieldPath
from strongroom.errors import ConfigError, StrongroomError
from strongroom.keys.errors import KeysConfigError, SubjectMissing
from strongroom.keys.records import MAX_SUBJECT_BYTES


class SubjectSource(enum.Enum):
    KEY = "key"
    JSON = "json"
    HEADER = "header"


class MissingSubjectPolicy(enum.Enum):
    """What to do with a record that has no usable subject."""

    ERROR = "error"
    SKIP = "skip"
    DEAD_LETTER = "dead-letter"


@dataclass(frozen=True)
class SubjectMissingInfo:
    """Why no subject was found (returned under ``skip``/``dead-letter``, raised under ``error``)."""

    topic: str
    partition: int
    offset: int
    reason: str
    policy: MissingSubjectPolicy

    def describe(self) -> str:
        return f"record {self.topic}/{self.partition}@{self.offset} has no subject: {self.reason}"


Headers = Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None


class SubjectExtractor:
    """Extract the subject of one topic's records. Build once per topic, call per record."""

    def __init__(
        self,
        source: SubjectSource | str,
        *,
        path: str | None = None,
        header: str | None = None,
        missing: MissingSubjectPolicy | str = MissingSubjectPolicy.ERROR,
    ) -> None:
        try:
            self.source = SubjectSource(source)
            self.missing = MissingSubjectPolicy(missing)
        except ValueError as exc:
            raise KeysConfigError(
                f"subject extraction: {exc}",
                hint="source is one of key, json, header; missing is one of error, skip, dead-letter",
            ) from None
        self.path: FieldPath | None = None
        self.header = header
        if self.source is SubjectSource.JSON:
            if not path:
                raise KeysConfigError("subject source 'json' needs a path such as $.customer.id")
            try:
                self.path = FieldPath.parse(path)
            except ConfigError as exc:
                raise KeysConfigError(f"subject path: {exc.problem}", hint=exc.hint) from None
            if WILDCARD in self.path.segments:
                raise KeysConfigError(f"subject path {path!r} uses [*]; a record has exactly one subject")
        elif self.source is SubjectSource.HEADER and not header:
            raise KeysConfigError("subject source 'header' needs a header name")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SubjectExtractor:
        """From ``{"from": "key"|"json"|"header", "path": ..., "header": ..., "missing": ...}``."""
        unknown = set(config) - {"from", "path", "header", "missing"}
        if unknown:
            raise KeysConfigError(f"subject extraction: unknown option(s) {sorted(unknown)}")
        return cls(
            config.get("from", "key"),
            path=config.get("path"),
            header=config.get("header"),
            missing=config.get("missing", "error"),
        )

    def describe(self) -> str:
        if self.source is SubjectSource.JSON and self.path is not None:
            return f"json {self.path.text}"
        if self.source is SubjectSource.HEADER:
            return f"header {self.header}"
        return "record key"

    def find(self, key: bytes | None, value: bytes | None, headers: Headers = None) -> str:
        """The subject; raises the internal ``_NoSubject`` with the reason when there is none."""
        if self.source is SubjectSource.KEY:
            return _text(key, "the record key")
        if self.source is SubjectSource.HEADER:
            return _text(_header(headers, self.header or ""), f"header {self.header!r}")
        return _json_subject(value, self.path)

    def extract(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = None,
    ) -> str | SubjectMissingInfo:
        """The subject of a record, or what the missing-subject policy says to do with it.

        Under ``error`` this raises :class:`SubjectMissing` naming topic/partition/offset.
        """
        try:
            return self.find(key, value, headers)
        except _NoSubject as exc:
            info = SubjectMissingInfo(topic, partition, offset, exc.reason, self.missing)
            if self.missing is MissingSubjectPolicy.ERROR:
                raise SubjectMissing(f"{info.describe()} (subject from {self.describe()})") from None
            return info


class SubjectExtractors:
    """The extractor of each topic: ``{"orders": {"from": "json", "path": "$.customer.id"}, ...}``."""

    def __init__(self, per_topic: Mapping[str, SubjectExtractor], default: SubjectExtractor | None = None) -> None:
        self.per_topic = dict(per_topic)
        self.default = default

    @classmethod
    def from_config(cls, config: Mapping[str, Mapping[str, Any]]) -> SubjectExtractors:
        per_topic = {topic: SubjectExtractor.from_config(conf) for topic, conf in config.items() if topic != "*"}
        default = SubjectExtractor.from_config(config["*"]) if "*" in config else None
        return cls(per_topic, default)

    def for_topic(self, topic: str) -> SubjectExtractor:
        extractor = self.per_topic.get(topic, self.default)
        if extractor is None:
            raise KeysConfigError(
                f"no subject extraction is configured for topic {topic!r}",
                hint="add the topic (or a '*' default) to the subject configuration",
            )
        return extractor


class _NoSubject(StrongroomError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _text(raw: bytes | None, where: str) -> str:
    if raw is None:
        raise _NoSubject(f"{where} is null")
    if not raw:
        raise _NoSubject(f"{where} is empty")
    if len(raw) > MAX_SUBJECT_BYTES:
        raise _NoSubject(f"{where} is {len(raw)} bytes, more than {MAX_SUBJECT_BYTES}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _NoSubject(f"{where} is not UTF-8 text") from None


def _header(headers: Headers, name: str) -> bytes | None:
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        return headers.get(name)
    for header_name, header_value in headers:
        if header_name == name:
            return header_value  # the first one wins, as in the Spark pipelines and the client library
    return None


def _json_subject(value: bytes | None, path: FieldPath | None) -> str:
    assert path is not None
    if value is None:
        raise _NoSubject("the value is null")
    try:  # the strict reader of field mode, as the pipelines and the client library read a subject's document
        node: Any = load_json_object(value)
    except NotJson:
        raise _NoSubject("the value is not UTF-8 JSON (or names a member twice)") from None
    for segment in path.segments:
        if not isinstance(node, dict) or segment not in node:
            raise _NoSubject(f"the value has no {path.text}")
        node = node[segment]
    if isinstance(node, bool) or not isinstance(node, str | int):
        kind = "null" if node is None else type(node).__name__
        raise _NoSubject(f"{path.text} is a {kind}, not a string or integer")
    return _text(str(node).encode("utf-8"), path.text)
