"""Per-topic encryption rules shared by the Spark pipelines and the client library.

A rule says, for the topics it matches: where the data subject comes from (record key, a JSON path in
the value, or a header), whether the whole value, selected JSON fields, or the fields a registry schema
tags (``mode: schema``, values in the Confluent wire format; docs/schema-aware.md) are encrypted, which AAD
profile binds the ciphertext, which topic the encrypted records go to, and what happens to records
the rule cannot handle (no subject, not JSON in field mode, too large). Rules are pydantic models so a
YAML/JSON rules file validates itself with messages that name the bad field.

Policies never write plaintext where ciphertext was promised: the only choices are to stop with an
error (default) or to divert the record, unchanged, to a dead-letter topic that is documented as
holding plaintext of rejected records (restrict it like the source topic).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from strongroom.envelope.ids import AadProfile
from strongroom.errors import ConfigError
from strongroom.policies import MissingKek, OnReject
from strongroom.text import SecretFileError, load_secret_settings, problem_list

TOPIC_PLACEHOLDER = "$(topic)"
_DOTTED_PATH = re.compile(r"^\$(\.[A-Za-z_][A-Za-z0-9_\-]*)+$")


class SubjectSource(BaseModel):
    """Where a record's data subject comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Literal["key", "json", "header"] = "key"
    #: JSON path in the value for ``json`` (dotted: ``$.customer.id``).
    path: str | None = None
    #: Header name for ``header``.
    header: str | None = None

    @model_validator(mode="after")
    def _check(self) -> SubjectSource:
        if self.source == "json" and (not self.path or not _DOTTED_PATH.match(self.path)):
            raise ValueError(f"subject path {self.path!r} must be a dotted JSON path like $.customer.id")
        if self.source == "header" and not self.header:
            raise ValueError("subject source 'header' needs the header name")
        return self

    def describe(self) -> str:
        if self.source == "json":
            return f"JSON path {self.path}"
        if self.source == "header":
            return f"header {self.header!r}"
        return "record key"


class TopicRule(BaseModel):
    """How the records of the matching topics are encrypted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: An exact topic name, or a regular expression when ``pattern`` is true.
    topic: str
    pattern: bool = False
    subject: SubjectSource = SubjectSource()
    #: ``value``: the whole value is one envelope. ``fields``: the listed JSON paths are encrypted.
    #: ``schema``: the value is a schema-registry record (Avro, JSON Schema, Protobuf); the fields its schema
    #: tags with one of ``tags`` (default ``PII``), and the listed ``fields``, are encrypted in place.
    mode: Literal["value", "fields", "schema"] = "value"
    fields: tuple[str, ...] = ()
    #: Schema mode: the inline tags (``confluent:tags``, ``(confluent.field_meta).tags``) that select fields.
    tags: tuple[str, ...] | None = None
    aad_profile: Literal["topic", "portable"] = "topic"
    #: Output topic template; ``$(topic)`` is the source topic.
    output_topic: str = "$(topic).enc"
    #: What to do with a record the rule cannot encrypt (no subject, not JSON in field mode, too large).
    on_reject: OnReject = OnReject.FAIL
    #: The KEK alias that wraps this rule's keys; ``$(topic)`` is the source topic (``pii-$(topic)``).
    #: Unset: the command's ``--kek-alias``. Each KEK has its own wrapping keys (docs/shredding.md).
    kek: str | None = None
    #: The KMS holding that KEK: a name in the rules file's ``kms:`` section. Unset: the command's KMS.
    kms: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    #: When the KEK does not exist: ``fail`` before sealing (default), or ``create`` it in the KMS.
    missing_kek: MissingKek = MissingKek.FAIL

    @field_validator("fields")
    @classmethod
    def _paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from strongroom.envelope.errors import InvalidFieldPath
        from strongroom.envelope.jsonpath import FieldPath

        for path in value:
            try:
                FieldPath.parse(path)
            except InvalidFieldPath as exc:
                raise ValueError(exc.problem) from None
        return value

    @field_validator("kek")
    @classmethod
    def _kek_template(cls, value: str | None) -> str | None:
        if value is not None and ("$(" in value.replace(TOPIC_PLACEHOLDER, "") or not value.strip()):
            raise ValueError(f"KEK template {value!r} is invalid: the only placeholder is {TOPIC_PLACEHOLDER}")
        return value

    @model_validator(mode="after")
    def _check(self) -> TopicRule:
        if self.tags is not None and self.mode != "schema":
            raise ValueError(f"rule for {self.topic!r} names tags but mode is {self.mode!r} (use mode: schema)")
        if self.mode == "schema" and self.tags == () and not self.fields:
            raise ValueError(f"rule for {self.topic!r} is in schema mode but selects no tags and no fields")
        if self.mode == "fields" and not self.fields:
            raise ValueError(f"rule for {self.topic!r} is in fields mode but lists no fields")
        if self.mode == "value" and self.fields:
            raise ValueError(f"rule for {self.topic!r} lists fields but mode is 'value' (use mode: fields)")
        if self.mode == "value" and self.subject.source == "json":
            raise ValueError(
                f"rule for {self.topic!r} encrypts the whole value but takes the subject from inside it: "
                "readers could not find the subject (use the record key or a header, or mode: fields)"
            )
        if self.mode in ("fields", "schema") and self.subject.source == "json":
            subject_path = self.subject.path or ""
            for field in self.fields:
                if subject_path == field or subject_path.startswith(field + "."):
                    raise ValueError(
                        f"rule for {self.topic!r} encrypts {field}, which holds the subject {subject_path}: "
                        "readers could not find the subject"
                    )
        if self.pattern:
            try:
                re.compile(self.topic)
            except re.error as exc:
                raise ValueError(f"topic pattern {self.topic!r} is not a valid regular expression: {exc}") from None
        return self

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.topic, topic) is not None if self.pattern else topic == self.topic

    def output_for(self, topic: str) -> str:
        return self.output_topic.replace(TOPIC_PLACEHOLDER, topic)

    def kek_alias_for(self, topic: str, default: str) -> str:
        """The KEK alias for ``topic``'s keys: the rule's template filled in, else ``default`` (the command's)."""
        return default if self.kek is None else self.kek.replace(TOPIC_PLACEHOLDER, topic)

    def require_not_schema(self, where: str) -> None:
        """Refuse a schema-mode rule in a place that does not handle it yet (the Spark pipelines)."""
        if self.mode == "schema":
            raise ConfigError(
                f"the rule for {self.topic!r} is in schema mode, which {where} does not handle yet",
                hint="use the client library (EncryptingProducer / DecryptingConsumer with schema_registry=...) "
                "for schema-registry topics; see docs/schema-aware.md",
            )

    @property
    def selected_tags(self) -> frozenset[str]:
        """Schema mode: the tags that select fields (``PII`` unless the rule names others)."""
        if self.mode != "schema":
            return frozenset()
        return frozenset(("PII",) if self.tags is None else self.tags)

    @property
    def profile(self) -> AadProfile:
        return AadProfile.PORTABLE if self.aad_profile == "portable" else AadProfile.TOPIC


def read_config_file(path: str | Path, what: str) -> Any:
    """A JSON or YAML file's content (YAML by extension). A syntax error names the file, line and cause,
    never the text around it: a rules file's ``kms:`` section can hold a token."""
    try:
        return load_secret_settings(path, what)
    except SecretFileError as exc:
        raise ConfigError(str(exc), hint=exc.hint) from None


class EncryptionRules(BaseModel):
    """An ordered list of rules: the first rule that matches a topic applies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: Annotated[tuple[TopicRule, ...], Field(min_length=1)]

    def rule_for(self, topic: str) -> TopicRule:
        for rule in self.rules:
            if rule.matches(topic):
                return rule
        raise ConfigError(
            f"no encryption rule matches topic {topic!r}",
            hint="add a rule for it, or narrow the subscription to the topics the rules cover",
        )

    def subscription(self) -> dict[str, str]:
        """Spark Kafka source options selecting the rules' topics (``subscribe`` or ``subscribePattern``)."""
        if any(r.pattern for r in self.rules):
            alternatives = "|".join(r.topic if r.pattern else re.escape(r.topic) for r in self.rules)
            return {"subscribePattern": alternatives}
        return {"subscribe": ",".join(r.topic for r in self.rules)}

    def refuse_own_output(self, outputs: Mapping[str, str], dead_letter_topic: str | None = None) -> None:
        """Refuse to write where these rules read. ``outputs`` maps each source topic to its output topic. An
        output topic a rule matches would be read back (a pattern is subscribed as a pattern) and processed again,
        into an output of its own, and so on: ``orders-.*`` with the default ``$(topic).enc`` writes orders-eu.enc,
        which it matches, then orders-eu.enc.enc. A dead-letter topic a rule matches would have its records
        processed as input."""
        written = [(f"the output topic of {source!r}", output) for source, output in outputs.items()]
        if dead_letter_topic:
            written.append(("the dead-letter topic", dead_letter_topic))
        for what, topic in written:
            rule = next((r for r in self.rules if r.matches(topic)), None)
            if rule is not None:
                raise ConfigError(
                    f"the rule for {rule.topic!r} matches {topic!r}, {what}: the pipeline would read what it "
                    "writes and process it again",
                    hint="narrow the rule's topic pattern (orders-[a-z]+ rather than orders-.*), or choose an output "
                    "topic it does not match",
                )

    @classmethod
    def load(cls, path: str | Path) -> EncryptionRules:
        """Read rules from a JSON or YAML file (``rules: [...]``).

        The file's ``kms:`` section (named KMS settings, which may hold tokens) is not part of the rules:
        rules travel to executors and into settings documents, KMS settings never do. It is read by
        :func:`strongroom.kms.catalog.load_kms_catalog`."""
        data = read_config_file(path, "rules file")
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "kms"}
        return cls.parse_obj_or_fail(data, str(path))

    def exact_topics(self) -> list[str]:
        """The topics named exactly (not by pattern), in rule order."""
        return [rule.topic for rule in self.rules if not rule.pattern]

    def kms_names(self) -> set[str]:
        """The named KMSes the rules refer to."""
        return {rule.kms for rule in self.rules if rule.kms is not None}

    @classmethod
    def parse_obj_or_fail(cls, data: Any, source: str = "rules") -> EncryptionRules:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = problem_list(exc.errors(include_input=False, include_url=False))
            raise ConfigError(f"invalid encryption rules in {source}: {problems}", hint="fix the rules") from None

    @classmethod
    def single(cls, topics: Iterable[str], **rule: Any) -> EncryptionRules:
        """Rules for a list of topics sharing one configuration (the CLI's shorthand)."""
        return cls.parse_obj_or_fail({"rules": [{"topic": t, **rule} for t in topics]}, "command line")
