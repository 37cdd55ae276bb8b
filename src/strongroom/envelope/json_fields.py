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
import functools
import json
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring  # C-accelerated
from typing import Any, Final, Literal

from strongroom.crypto.limits import DekUsage
from strongroom.envelope.aad import RecordContext
from strongroom.envelope.codec import KeyLookup, ParsedEnvelope, open_envelope, parse, seal
from strongroom.envelope.errors import (
    MalformedEnvelope,
    NotJson,
    NotJsonObject,
    SubjectErased,
    UnencryptedField,
    subject_fingerprint,
)
from strongroom.envelope.ids import FIELD_PREFIX
from strongroom.envelope.jsonpath import WILDCARD, FieldRules, Segment, render_path
from strongroom.envelope.keyref import KeyRef
from strongroom.errors import EnvelopeError

ErasedPolicy = Literal["null", "raise"]

_PREFIX_LEN: Final = len(FIELD_PREFIX)
_FIELD_PREFIX_BYTES: Final = FIELD_PREFIX.encode("ascii")
_JSON_TYPES: Final = {dict: "object", list: "array", str: "string", int: "number", float: "number"}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One encoder and one decoder for the process: json.dumps/loads with non-default options build a
# new one on every call, which costs more than the encryption of a field. NaN/Infinity literals
# are refused when parsing; numbers that overflow a double (1e400) parse to inf and are refused
# by the encoder (allow_nan=False) when the document is written back.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _dumps(value: Any) -> str:
    if type(value) is str:
        return str(encode_basestring(value))
    try:
        return _ENCODER.encode(value)
    except ValueError:
        raise NotJson("value contains a number that does not fit a double (like 1e400)") from None


def load_json_object(value: bytes) -> dict[str, Any]:
    """Decode a record value as a JSON object, or raise :class:`NotJson` / :class:`NotJsonObject`."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotJson(f"value is not UTF-8 (bad byte at offset {exc.start})") from None
    try:
        document = _DECODER.decode(text)
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
        raise MalformedEnvelope(f"encrypted field string is not valid base64 after {FIELD_PREFIX!r}") from None


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
        rules = _compiled(tuple(rules))
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


def _check_encrypted(document: dict[str, Any], rules: FieldRules | Sequence[str]) -> None:
    if not isinstance(rules, FieldRules):
        rules = _compiled(tuple(rules))
    for path in rules.paths:
        *parents, last = path.segments
        nodes: list[Any] = [document]
        for segment in parents:
            nodes = _step(nodes, segment)
        for node in nodes:
            for container, slot in _slots(node, last):
                current = container[slot]
                if not (isinstance(current, str) and current.startswith(FIELD_PREFIX)):
                    raise UnencryptedField(
                        f"field {path.text} should be encrypted but holds a plaintext JSON "
                        f"{_JSON_TYPES.get(type(current), 'boolean' if isinstance(current, bool) else 'null')}"
                    )


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
    expect_encrypted: FieldRules | Sequence[str] | None = None,
) -> bytes:
    """Open every ``sr1:`` field of the JSON object ``value``; all or nothing.

    ``key_lookup`` returns the DEK for a key reference, or None if it was erased: the field then
    becomes ``null`` (``on_erased="null"``) or :class:`SubjectErased` is raised. Any other failure
    raises and nothing is returned, so a caller never sees a half-decrypted document.

    Field mode authenticates each encrypted value, not the rest of the document: someone who can
    rewrite records could replace an ``sr1:`` string with a plaintext value. Readers that know the
    topic's rules pass them as ``expect_encrypted``; a present value at one of those paths that is
    not an envelope then raises :class:`UnencryptedField`.
    """
    if on_erased not in ("null", "raise"):
        raise ValueError(f"on_erased must be 'null' or 'raise', got {on_erased!r}")
    document = load_json_object(value)
    if expect_encrypted is not None:
        _check_encrypted(document, expect_encrypted)
    found = _find_sealed(document) if _FIELD_PREFIX_BYTES in value else []
    if not found:
        return value
    keys: dict[bytes, bytes | None] = {}  # by envelope header: one lookup per key per document
    replacements: list[tuple[Any, Any, Any]] = []
    for container, slot, segments in found:
        parsed = parse(_decode_field(container[slot]))
        path_text = _path_text(segments)
        if parsed.header in keys:
            dek = keys[parsed.header]
        else:
            dek = keys[parsed.header] = key_lookup(parsed.key_ref)
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
        return _DECODER.decode(plaintext.decode("utf-8"))
    except (ValueError, RecursionError):
        raise MalformedEnvelope(
            f"field {path_text} decrypted to something that is not JSON text; the producer is broken"
        ) from None


@functools.lru_cache(maxsize=256)
def _compiled(rules: tuple[str, ...]) -> FieldRules:
    return FieldRules(rules)


@functools.lru_cache(maxsize=4096)
def _path_text(segments: tuple[Segment, ...]) -> str:
    return render_path(segments)


def _find_sealed(document: dict[str, Any]) -> list[tuple[Any, Any, tuple[Segment, ...]]]:
    """Every ``sr1:`` string in the document: (container, key or index, path segments).

    Containers are walked with a link to their parent step, so a path is only materialised for
    the (few) encrypted strings, not for every object and array of the document.
    """
    found: list[tuple[Any, Any, tuple[Segment, ...]]] = []
    # stack entries: (container, link); a link is None or (parent link, segment)
    stack: list[tuple[Any, Any]] = [(document, None)]
    while stack:
        node, link = stack.pop()
        if isinstance(node, dict):
            for name, child in node.items():
                if isinstance(child, str):
                    if child.startswith(FIELD_PREFIX):
                        found.append((node, name, _segments((link, name))))
                elif isinstance(child, dict | list):
                    stack.append((child, (link, name)))
        else:
            for index, child in enumerate(node):
                if isinstance(child, str):
                    if child.startswith(FIELD_PREFIX):
                        found.append((node, index, _segments((link, WILDCARD))))
                elif isinstance(child, dict | list):
                    stack.append((child, (link, WILDCARD)))
    return found


def _segments(link: Any) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    while link is not None:
        link, segment = link
        segments.append(segment)
    return tuple(reversed(segments))
