"""A client configuration file, checked by librdkafka and resolved to what the client would really use.

Every property name and value is first put to the installed librdkafka (see ``rdkafka_catalogue``):
unknown names get a suggestion, Java-only names get their librdkafka equivalent, bad values get
librdkafka's own message. The valid properties are then resolved to librdkafka's canonical names
(``acks`` is ``request.required.acks``, ``delivery.timeout.ms`` is ``message.timeout.ms``) so the
lint rules see one name per setting and, for unset ones, librdkafka's real default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strongroom.doctor.java_client import JAVA_ONLY_PROPERTIES, JavaOnly
from strongroom.doctor.rdkafka_catalogue import Catalogue, check_property, load_catalogue
from strongroom.errors import ConfigError
from strongroom.kafka.config import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS

ROLES = ("producer", "consumer")

#: Values of these properties never appear in findings or messages.
_SENSITIVE = re.compile(r"password|secret|jaas|token|credential|(^|\.)key$|key\.pem|keystore\.key", re.IGNORECASE)

#: Left out when constructing a throwaway client to check the properties together: they would make
#: librdkafka reach the network, read key files, run ``sasl.kerberos.kinit.cmd`` or load plugins -
#: none of which a linter should do - and they have no cross-property rules we need.
_NOT_FOR_CONSTRUCTION = re.compile(
    r"^(bootstrap\.servers|metadata\.broker\.list|security\.protocol|sasl\..*|ssl\..*|ssl_.*|plugin\..*|"
    r"enable\.ssl\..*|https?\..*|client\.dns\.lookup)$"
)


def is_sensitive(name: str) -> bool:
    return bool(_SENSITIVE.search(name))


@dataclass(frozen=True)
class NameProblem:
    """A property librdkafka rejects (``unknown``, ``java-only``, ``invalid``) or that was not validated."""

    written: str
    kind: str
    message: str
    suggestions: tuple[str, ...] = ()
    java: JavaOnly | None = None


@dataclass(frozen=True)
class ClientConfigView:
    """The checked configuration: valid settings by canonical name, plus what was wrong with the rest."""

    source: str
    roles: frozenset[str]
    role_reason: str
    #: canonical librdkafka name → value as written
    settings: dict[str, str]
    #: canonical name → the name used in the file
    written_as: dict[str, str]
    problems: tuple[NameProblem, ...] = ()
    #: librdkafka's message when the valid properties together were refused by a client constructor.
    rejected: dict[str, str] = field(default_factory=dict)
    catalogue: Catalogue | None = None
    explicit_role: bool = False

    @property
    def is_producer(self) -> bool:
        return "producer" in self.roles

    @property
    def is_consumer(self) -> bool:
        return "consumer" in self.roles

    def canonical(self, name: str) -> str:
        return self.catalogue.canonical(name) if self.catalogue is not None else name

    def label(self, name: str) -> str:
        """The name as the operator wrote it (or the usual name when unset)."""
        return self.written_as.get(self.canonical(name), name)

    def is_set(self, name: str) -> bool:
        return self.canonical(name) in self.settings

    def value(self, name: str) -> tuple[str | None, str]:
        """The effective value and where it comes from: the file, or librdkafka's default."""
        canonical = self.canonical(name)
        if canonical in self.settings:
            return self.settings[canonical], f"set in {self.source}"
        if self.catalogue is not None:
            return self.catalogue.default(canonical), f"librdkafka {self.catalogue.version} default"
        return None, "librdkafka default (unknown: property catalogue unavailable)"

    def number(self, name: str) -> int | None:
        text, _ = self.value(name)
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    def recommended(self, name: str) -> Any:
        """strongroom's recommended value (``strongroom.kafka.config``) for this role, if it has one."""
        tables = ([PRODUCER_DEFAULTS] if self.is_producer else []) + ([CONSUMER_DEFAULTS] if self.is_consumer else [])
        if not tables:
            from strongroom.kafka.config import COMMON_DEFAULTS

            tables = [COMMON_DEFAULTS]
        canonical = self.canonical(name)
        for table in tables:
            for key, value in table.items():
                if self.canonical(key) == canonical:
                    return value
        return None


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _redact(message: str, value: str) -> str:
    return message.replace(value, "[redacted]") if value else message


def _detect_roles(names: list[str], catalogue: Catalogue | None) -> tuple[frozenset[str], str]:
    if catalogue is None:
        producer = any(n in ("acks", "enable.idempotence", "transactional.id", "linger.ms") for n in names)
        consumer = "group.id" in names
    else:
        scopes = {n: info.scope for n in names if (info := catalogue.info(n)) is not None}
        producer = any(s == "P" for s in scopes.values())
        consumer = "group.id" in names or any(s == "C" for s in scopes.values())
    roles = frozenset(r for r, present in (("producer", producer), ("consumer", consumer)) if present)
    if roles == {"producer", "consumer"}:
        return roles, "both producer and consumer properties are set: linted as both"
    if roles:
        role = next(iter(roles))
        return roles, f"{role} properties are set"
    return roles, "no producer- or consumer-only property is set: only common settings linted (pass --role)"


def _construction_check(
    settings: Mapping[str, str], written_as: Mapping[str, str], roles: frozenset[str]
) -> dict[str, str]:
    """Build throwaway clients from the valid properties: catches cross-property conflicts
    (e.g. ``enable.idempotence=true`` with ``acks=1``) exactly as the real client would."""
    from confluent_kafka import KafkaException

    from strongroom.kafka.transport import build_consumer, build_producer, rdkafka_error

    conf = {written_as[k]: v for k, v in settings.items() if not _NOT_FOR_CONSTRUCTION.match(k)}
    conf["log_level"] = "0"
    refused: dict[str, str] = {}
    for role in sorted(roles) or ["producer"]:
        try:
            if role == "producer":
                build_producer(conf)
            else:
                consumer = build_consumer({"group.id": "strongroom-doctor-lint", **conf})
                consumer.close()
        except KafkaException as exc:
            error: Any = rdkafka_error(exc)
            refused[role] = str(error.str()) if hasattr(error, "str") else str(exc)
        except (TypeError, ValueError) as exc:
            refused[role] = str(exc)
    return refused


def check_client_config(properties: Mapping[str, str], *, source: str, role: str = "auto") -> ClientConfigView:
    """Validate every property with librdkafka and resolve the rest to canonical names."""
    if role not in (*ROLES, "auto", "both"):
        raise ConfigError(f"unknown client role {role!r}", hint="use producer, consumer, both or auto")
    catalogue = load_catalogue()
    problems: list[NameProblem] = []
    settings: dict[str, str] = {}
    written_as: dict[str, str] = {}
    for name, value in properties.items():
        verdict = check_property(name, value)
        shown_value = "[redacted]" if is_sensitive(name) else value
        if verdict.status == "ok" or verdict.status == "unchecked":
            canonical = catalogue.canonical(name) if catalogue is not None else name
            settings[canonical] = value
            written_as[canonical] = name
            if verdict.status == "unchecked":
                problems.append(NameProblem(name, "unchecked", verdict.message))
        elif name in JAVA_ONLY_PROPERTIES:  # unknown to librdkafka, or known only to be refused
            problems.append(NameProblem(name, "java-only", verdict.message, java=JAVA_ONLY_PROPERTIES[name]))
        elif verdict.status == "unknown":
            suggestions = tuple(catalogue.suggestions(name)) if catalogue is not None else ()
            problems.append(NameProblem(name, "unknown", verdict.message, suggestions=suggestions))
        else:
            message = _redact(verdict.message, value) if is_sensitive(name) else verdict.message
            problems.append(NameProblem(name, "invalid", f"{message} (value {shown_value!r})".strip()))
    if role == "auto":
        roles, reason = _detect_roles(list(properties), catalogue)
        explicit = False
    else:
        roles = frozenset(ROLES) if role == "both" else frozenset({role})
        reason, explicit = f"--role {role}", True
    rejected = _construction_check(settings, written_as, roles) if settings else {}
    return ClientConfigView(
        source=source,
        roles=roles,
        role_reason=reason,
        settings=settings,
        written_as=written_as,
        problems=tuple(problems),
        rejected=rejected,
        catalogue=catalogue,
        explicit_role=explicit,
    )
