"""Record-level conventions the client library shares, byte for byte, with the Spark pipelines.

The Spark pipelines decide these things with column expressions (:mod:`strongroom.spark.transforms`);
this module decides them in Python the same way, so a record sealed by one is opened by the other:

* **Subject**: the UTF-8 text of the record key, of the *first* header with the configured name, or of
  the JSON path in the value as Spark's ``get_json_object`` renders it (strings unquoted, integers as
  written, booleans ``true``/``false``, other numbers in the layout of Java's ``Double.toString`` with the
  shortest digits that read back as the same double: :func:`java_double_text`, which the JVM engine's
  ``PyFloat.javaDoubleText`` equals; JDK 17's own ``Double.toString`` gives more digits for some). Empty means none.
* **Rule of an encrypted topic**: a rule that matches the topic itself (a decrypt-side rules file that
  names ``orders.enc``), else the rule whose output template produced it (an encrypt-side file naming
  ``orders`` with output ``$(topic).enc``) — so one rules file serves producers and consumers.
* **Headers**: the ``strongroom.enc`` marker goes first; every other header follows unchanged.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from strongroom.envelope.errors import NotJson, subject_fingerprint
from strongroom.envelope.ids import RECORD_HEADER_NAME
from strongroom.envelope.json_fields import load_json_object
from strongroom.errors import ConfigError
from strongroom.keys.records import MAX_SUBJECT_BYTES
from strongroom.rules import TOPIC_PLACEHOLDER, EncryptionRules, TopicRule

#: Header carrying why a record went to the dead-letter topic (same name as the Spark pipelines).
DEAD_LETTER_REASON: Final = "strongroom.dead-letter.reason"
#: Header naming where a dead-lettered record came from (``topic/partition/offset``, or the topic).
DEAD_LETTER_SOURCE: Final = "strongroom.dead-letter.source"
#: Header on a whole-value record of an erased subject kept (value null) under ``erased="mark"``.
ERASED_HEADER: Final = "strongroom.erased"

Header = tuple[str, bytes | None]
HeadersIn = Sequence[tuple[str, Any]] | Mapping[str, Any] | None


def normalize_headers(headers: HeadersIn) -> list[Header]:
    """Headers as a list of ``(name, bytes | None)`` (confluent-kafka also accepts dicts and str values)."""
    if not headers:
        return []
    items: Iterable[tuple[str, Any]] = headers.items() if isinstance(headers, Mapping) else headers
    out: list[Header] = []
    for name, value in items:
        if value is None or isinstance(value, bytes):
            out.append((name, value))
        elif isinstance(value, str):
            out.append((name, value.encode("utf-8")))
        elif isinstance(value, bytearray | memoryview):
            out.append((name, bytes(value)))
        else:
            raise ConfigError(
                f"header {name!r} has a {type(value).__name__} value",
                hint="header values are bytes, str or None",
            )
    return out


def with_marker(headers: list[Header], marker: Header) -> list[Header]:
    """The marker first, then every other header unchanged (an existing marker is replaced)."""
    return [marker, *(h for h in headers if h[0] != RECORD_HEADER_NAME)]


def without_marker(headers: list[Header]) -> list[Header]:
    return [h for h in headers if h[0] != RECORD_HEADER_NAME]


def key_fingerprint(key: bytes | None) -> str:
    """How errors name a record before it has an offset: never the key itself (it may be personal data)."""
    return "null key" if key is None else f"key {subject_fingerprint(key)}"


# ------------------------------------------------------------------------------------------ subjects
@dataclass(frozen=True)
class NoSubject:
    """Why a record has no subject (the text follows the Spark pipelines' rejection reason)."""

    reason: str


def subject_of(rule: TopicRule, key: bytes | None, value: bytes | None, headers: list[Header]) -> str | NoSubject:
    """The record's data subject per the rule, as the Spark pipelines compute it."""
    source = rule.subject
    where = rule.subject.describe()
    if source.source == "key":
        raw = key
    elif source.source == "header":
        raw = next((v for n, v in headers if n == source.header), None)  # the first one, like Spark
    else:
        return json_path_subject(value, source.path or "", where)
    if raw is None or raw == b"":
        return NoSubject(f"no subject ({where} is missing or empty)")
    return _checked(raw, where)


def _checked(raw: bytes, where: str) -> str | NoSubject:
    if len(raw) > MAX_SUBJECT_BYTES:
        return NoSubject(f"no subject ({where} is {len(raw)} bytes, more than {MAX_SUBJECT_BYTES})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return NoSubject(f"no subject ({where} is not UTF-8 text)")


def json_path_subject(value: bytes | None, path: str, where: str) -> str | NoSubject:
    """The subject at the dotted JSON ``path`` of ``value`` (``where`` names the source in the reason)."""
    if value is None:
        return NoSubject(f"no subject ({where} is missing or empty)")
    try:
        node: Any = load_json_object(value)
    except NotJson:
        return NoSubject(f"no subject ({where} is missing: the value is not a JSON object)")
    for step in path[2:].split("."):
        if not isinstance(node, dict) or step not in node:
            return NoSubject(f"no subject ({where} is missing or empty)")
        node = node[step]
    text = json_scalar_text(node)
    if text is None:
        kind = "null" if node is None else type(node).__name__
        return NoSubject(f"no subject ({where} is a JSON {kind}, not a string or number)")
    if not text:
        return NoSubject(f"no subject ({where} is missing or empty)")
    try:
        return _checked(text.encode("utf-8"), where)
    except UnicodeEncodeError:
        return NoSubject(f"no subject ({where} is not valid Unicode text)")


def json_scalar_text(node: Any) -> str | None:
    """A JSON scalar as Spark's ``get_json_object`` prints it; None for null, objects and arrays."""
    if isinstance(node, str):
        return node
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, float):
        return java_double_text(node)
    return None


def java_double_text(value: float) -> str:
    """``Double.toString``'s layout: plain decimals in [1e-3, 1e7), else ``d.dddE±n``; the shortest round-trip digits
    (Python's ``repr``), on every JVM alike (JDK 17's ``Double.toString`` prints 7.693891857e18 as
    7.6938918569999995E18, JDK 19's 4.9e-324 as 4.9E-324)."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits, exponent = _shortest_digits(magnitude)
    if 1e-3 <= magnitude < 1e7:
        point = exponent + 1  # position of the decimal point within the digits
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
        return sign + text
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"


def _shortest_digits(magnitude: float) -> tuple[str, int]:
    """Significant digits (no trailing zeros) of the shortest round-trip form, and the first one's exponent."""
    _, digits, exponent = decimal.Decimal(repr(magnitude)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0") or "0"
    stripped = text.rstrip("0") or "0"
    # value = int(text) * 10**exponent; the first digit sits at exponent + len(text) - 1
    return stripped, exponent + len(text) - 1


# ------------------------------------------------------------------------------------------ rules
def rule_for_encrypted(rules: EncryptionRules, topic: str) -> TopicRule:
    """The rule that governs the encrypted topic ``topic`` (see the module docstring)."""
    for rule in rules.rules:
        if rule.matches(topic):
            return rule
    for rule in rules.rules:
        source = source_topic(rule, topic)
        if source is not None and rule.matches(source) and rules.rule_for(source) is rule:
            return rule
    raise ConfigError(
        f"no encryption rule matches topic {topic!r}, directly or as an output topic",
        hint="add a rule naming the topic (or its source topic), or narrow the subscription",
    )


def source_topic(rule: TopicRule, encrypted: str) -> str | None:
    """The source topic whose output under ``rule`` is ``encrypted``, if the template allows it."""
    template = rule.output_topic
    if TOPIC_PLACEHOLDER not in template:
        return rule.topic if encrypted == template and not rule.pattern else None
    prefix, _, suffix = template.partition(TOPIC_PLACEHOLDER)
    if TOPIC_PLACEHOLDER in suffix:
        return None
    if len(encrypted) > len(prefix) + len(suffix) and encrypted.startswith(prefix) and encrypted.endswith(suffix):
        return encrypted[len(prefix) : len(encrypted) - len(suffix)]
    return None


# ------------------------------------------------------------------------------------------ messages
class MessageStatus(StrEnum):
    """What the consumer did with a record it hands to the application."""

    #: Decrypted (in field mode, fields of an erased subject became null: see ``erased_fields``).
    DECRYPTED = "decrypted"
    #: Not encrypted: a tombstone, or a record without the marker header or an envelope.
    PASSTHROUGH = "passthrough"
    #: Whole-value record of an erased subject kept under ``erased="mark"``: value None + header.
    ERASED = "erased"


@dataclass(frozen=True, slots=True)
class DecryptedMessage:
    """One record as the application sees it: decrypted value, headers without the marker."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None = field(repr=False)
    headers: list[Header] = field(repr=False)
    timestamp: int | None
    timestamp_type: int
    leader_epoch: int | None
    status: MessageStatus
    subject: str | None = field(default=None, repr=False)
    #: Field mode: some encrypted fields belonged to an erased subject and are now null.
    erased_fields: bool = False

    def header(self, name: str) -> bytes | None:
        """The first header called ``name`` (None if absent)."""
        return next((v for n, v in self.headers if n == name), None)
