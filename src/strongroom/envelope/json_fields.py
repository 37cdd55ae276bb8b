"""JSON field mode: encrypt selected fields of a JSON object value, leave the rest readable.

Each selected value (any JSON type) is replaced by the string ``"sr1:" + base64(envelope)``; the
envelope's plaintext is the compact UTF-8 JSON text of the original value, so numbers, booleans,
null, objects and arrays come back with their type. The field path bound in the AAD is the
canonical rule path with ``[*]`` for array steps (see :mod:`strongroom.envelope.jsonpath`).

The output is the whole document re-serialised compactly (``ensure_ascii=False``): unselected fields
keep their values, not their original whitespace or number spelling. A document in which no rule
matched is returned byte for byte unchanged.

Decryption needs no rules: it opens every string that starts with ``sr1:``, deriving its path from
where it sits. Strings starting with ``sr1:`` are therefore reserved in field-mode topics; one that
is not a valid envelope is an error, never silently passed on.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from strongroom.crypto.limits import DekUsage
from strongroom.envelope.aad import RecordContext
from strongroom.envelope.codec import KeyLookup, ParsedEnvelope, open_envelope, parse, seal
from strongroom.envelope.errors import (
    MalformedEnvelope,
    NotJson,
    NotJsonObject,
    SubjectErased,
    subject_fingerprint,
)
from strongroom.envelope.ids import FIELD_PREFIX
from strongroom.envelope.jsonpath import WILDCARD, FieldRules, Segment, render_path
from strongroom.envelope.keyref import KeyRef
from strongroom.errors import EnvelopeError

ErasedPolicy = Literal["null", "raise"]

_PREFIX_LEN: Final = len(FIELD_PREFIX)
_JSON_TYPES: Final = {dict: "object", list: "array", str: "string", int: "number", float: "number"}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:40]} does not fit a double")
    return number


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def load_json_object(value: bytes) -> dict[str, Any]:
    """Decode a record value as a JSON object, or raise :class:`NotJson` / :class:`NotJsonObject`."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotJson(f"value is not UTF-8 (bad byte at offset {exc.start})") from None
    try:
        document = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise NotJson(f"value is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise NotJson(f"value is not usable JSON: {reason}") from None
    if not isinstance(document, dict):
        kind = "null" if document is None else _JSON_TYPES.get(type(document), "boolean")
        raise NotJsonObject(f"value is a JSON {kind}, not an object")
    return document


def _looks_sealed(value: Any) -> bool:
    if not isinstance(value, str) or not value.startswith(FIELD_PREFIX):
        return False
    try:
        parse(_decode_field(value))
    except EnvelopeError:
        return False
    return True


def _decode_field(value: str) -> bytes:
    try:
        return base64.b64decode(value[_PREFIX_LEN:], validate=True)
    except (binascii.Error, ValueError):
        raise MalformedEnvelope(
            f"encrypted field string is not valid base64 after {FIELD_PREFIX!r}"
        ) from None


def encrypt_json_fields(
    value: bytes,
    rules: FieldRules | Sequence[str],
    dek: bytes,
    key_ref: KeyRef,
    ctx: RecordContext,
    *,
    usage: DekUsage | None = None,
) -> bytes:
    """Encrypt the fields ``rules`` select in the JSON object ``value``; missing paths are left alone.

    A selected value that is already an ``sr1:`` envelope is kept as is, so re-running an
    at-least-once pipeline does not encrypt twice.
    """
    if not isinstance(rules, FieldRules):
        rules = FieldRules(rules)
    document = load_json_object(value)
    changed = False
    for path in rules.paths:
        *parents, last = path.segments
        nodes: list[Any] = [document]
        for segment in parents:
            nodes = _step(nodes, segment)
        for node in nodes:
            for container, slot in _slots(node, last):
                current = container[slot]
                if _looks_sealed(current):
                    continue
                envelope = seal(_dumps(current).encode("utf-8"), dek, key_ref, ctx, path.text, usage=usage)
                container[slot] = FIELD_PREFIX + base64.b64encode(envelope).decode("ascii")
                changed = True
    return _dumps(document).encode("utf-8") if changed else value


def _step(nodes: list[Any], segment: Segment) -> list[Any]:
    found: list[Any] = []
    for node in nodes:
        if segment is WILDCARD:
            if isinstance(node, list):
                found.extend(node)
        elif isinstance(node, dict) and segment in node:
            found.append(node[segment])
    return found


def _slots(node: Any, segment: Segment) -> list[tuple[Any, Any]]:
    if segment is WILDCARD:
        return [(node, i) for i in range(len(node))] if isinstance(node, list) else []
    if isinstance(node, dict) and segment in node:
        return [(node, segment)]
    return []


def decrypt_json_fields(
    value: bytes,
    key_lookup: KeyLookup,
    ctx: RecordContext,
    *,
    topic_map: Mapping[str, str] | None = None,
    on_erased: ErasedPolicy = "null",
) -> bytes:
    """Open every ``sr1:`` field of the JSON object ``value``; all or nothing.

    ``key_lookup`` returns the DEK for a key reference, or None if it was erased: the field then
    becomes ``null`` (``on_erased="null"``) or :class:`SubjectErased` is raised. Any other failure
    raises and nothing is returned, so a caller never sees a half-decrypted document.
    """
    if on_erased not in ("null", "raise"):
        raise ValueError(f"on_erased must be 'null' or 'raise', got {on_erased!r}")
    document = load_json_object(value)
    found = _find_sealed(document)
    if not found:
        return value
    keys: dict[KeyRef, bytes | None] = {}
    replacements: list[tuple[Any, Any, Any]] = []
    for container, slot, segments in found:
        parsed = parse(_decode_field(container[slot]))
        path_text = render_path(segments)
        if parsed.key_ref not in keys:
            keys[parsed.key_ref] = key_lookup(parsed.key_ref)
        dek = keys[parsed.key_ref]
        if dek is None:
            if on_erased == "raise":
                raise SubjectErased(
                    f"field {path_text} of subject {subject_fingerprint(ctx.subject)} was sealed with "
                    f"the erased key {parsed.key_ref!r}"
                )
            replacements.append((container, slot, None))
            continue
        replacements.append((container, slot, _open_field(parsed, dek, ctx, path_text, topic_map)))
    for container, slot, plain in replacements:
        container[slot] = plain
    return _dumps(document).encode("utf-8")


def _open_field(
    parsed: ParsedEnvelope,
    dek: bytes,
    ctx: RecordContext,
    path_text: str,
    topic_map: Mapping[str, str] | None,
) -> Any:
    plaintext = open_envelope(parsed, dek, ctx, path_text, topic_map=topic_map)
    try:
        text = plaintext.decode("utf-8")
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        raise MalformedEnvelope(
            f"field {path_text} decrypted to something that is not JSON text; the producer is broken"
        ) from None


def _find_sealed(document: dict[str, Any]) -> list[tuple[Any, Any, tuple[Segment, ...]]]:
    """Every ``sr1:`` string in the document: (container, key or index, path segments)."""
    found: list[tuple[Any, Any, tuple[Segment, ...]]] = []
    stack: list[tuple[Any, tuple[Segment, ...]]] = [(document, ())]
    while stack:
        node, path = stack.pop()
        is_list = isinstance(node, list)
        slot: Any
        for slot, child in enumerate(node) if is_list else node.items():
            if isinstance(child, str):
                if child.startswith(FIELD_PREFIX):
                    found.append((node, slot, (*path, WILDCARD if is_list else slot)))
            elif isinstance(child, dict | list):
                stack.append((child, (*path, WILDCARD if is_list else slot)))
    return found
