"""JSON field mode: encrypt selected fields of a JSON object value, leave the rest readable.

Each selected value (any JSON type) is replaced by the string ``"sr1:" + base64(envelope)``; the
envelope's plaintext is the compact UTF-8 JSON text of the original value, so numbers, booleans,
null, objects and arrays come back with their type. The field path bound in the AAD is the
canonical rule path with ``[*]`` for array steps (see :mod:`strongroom.envelope.jsonpath`).

The output is the whole document re-serialised compactly (``ensure_ascii=False``): unselected fields
keep their values, not their original whitespace or number spelling. A document in which no rule
matched is returned byte for byte unchanged.

Both directions read documents strictly, so that a reader can never see something other than what
was sealed (docs/wire-format.md, "Field mode: what is refused"): invalid UTF-8, duplicate member
names at any depth (readers disagree on which one wins), NaN/Infinity, numbers beyond a double, lone
UTF-16 surrogate escapes (no UTF-8 form) and nesting too deep are :class:`NotJson`. Envelopes are
found in the *parsed* document, never by searching the raw bytes, and an ``sr1:`` string must be
spelt canonically (``"sr1:`` followed by base64, no escapes): strongroom never writes anything else.

* Encrypting refuses an ``sr1:`` string outside the rule's fields (:class:`StrayEnvelope`), and keeps
  one at a rule field only if it opens under this subject's key for this topic and field
  (:class:`UnverifiedEnvelope`): a plaintext value that merely looks sealed is never kept.
* Decrypting with the topic's rules opens the rule fields only; ``sr1:`` strings elsewhere are left as
  they are, never opened. Without rules it opens every ``sr1:`` string, deriving each path from where
  it sits.
"""

from __future__ import annotations

import binascii
import functools
import json
import math
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring  # C-accelerated
from typing import Any, Final, NamedTuple

import orjson

from strongroom.crypto.limits import DekUsage
from strongroom.envelope.aad import RecordContext, new_aad_frame
from strongroom.envelope.codec import KeyLookup, ParsedEnvelope, open_envelope, parse, seal
from strongroom.envelope.errors import (
    MalformedEnvelope,
    NotJson,
    NotJsonObject,
    StrayEnvelope,
    SubjectErased,
    UnencryptedField,
    UnverifiedEnvelope,
    subject_fingerprint,
)
from strongroom.envelope.ids import FIELD_PREFIX
from strongroom.envelope.jsonpath import WILDCARD, FieldRules, Segment, render_path
from strongroom.envelope.keyref import KeyRef
from strongroom.envelope.sealed_text import sealed_envelope
from strongroom.errors import EnvelopeError
from strongroom.policies import OnErasedField

try:  # field mode's strict reader and canonical writer in C, built by `make` from _canonical.c (issue 18)
    from strongroom.envelope._canonical import canonical as _native_canonical
except ImportError:  # pragma: no cover - an install without the project's build: the Python path reads every value
    _native_canonical = None

#: Whether the native reader is here (the project's build makes it; a test insists).
NATIVE: Final = _native_canonical is not None

_orjson_dumps: Final = orjson.dumps
_orjson_loads: Final = orjson.loads
_b2a_base64: Final = binascii.b2a_base64
#: What a sealed field's plaintext may parse to through orjson (see :func:`_field_json`).
_SCALARS: Final = frozenset((str, int, bool, type(None)))
_PREFIX_LEN: Final = len(FIELD_PREFIX)
_FIELD_PREFIX_BYTES: Final = FIELD_PREFIX.encode("ascii")
_SEALED_QUOTE: Final = b'"' + _FIELD_PREFIX_BYTES
_SEALED_START: Final = len(_SEALED_QUOTE)
_NULL: Final = b"null"
_JSON_TYPES: Final = {dict: "object", list: "array", str: "string", int: "number", float: "number"}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One encoder and one decoder for the process: json.dumps/loads with non-default options build a
# new one on every call, which costs more than the encryption of a field. NaN/Infinity literals
# are refused when parsing; numbers that overflow a double (1e400) parse to inf and are refused
# by the encoder (allow_nan=False) when the document is written back.
class _DuplicateMember(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``object_pairs_hook``: a JSON object, refused when it names a member twice."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _DuplicateMember(name)
            seen.add(name)
    return document


class _Double(float):
    """A JSON number parsed as a double. Its own type so the fast encoder renders it as the stdlib does."""

    __slots__ = ()


_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_DECODER: Final = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_unique_members, parse_float=_Double
)
#: Raw bytes that can spell the start of an ``sr1:`` string: the prefix itself, or any JSON escape.
_ESCAPE: Final = b"\\u"


def _dumps(value: Any) -> str:
    if type(value) is str:
        return str(encode_basestring(value))
    try:
        return _ENCODER.encode(value)
    except ValueError:
        raise NotJson("value contains a number that does not fit a double (like 1e400)") from None


def _double_text(value: Any) -> orjson.Fragment:
    """orjson's ``default`` for doubles: ``float.__repr__``, exactly what the stdlib encoder writes."""
    if type(value) is _Double and math.isfinite(value):
        return orjson.Fragment(float.__repr__(value).encode("ascii"))
    raise TypeError("left to the stdlib encoder")


def _json_bytes(value: Any) -> bytes:
    """The canonical UTF-8 JSON text of ``value`` (compact, non-ASCII as is, stdlib number spelling).

    orjson writes it (byte-identical to ``_ENCODER`` for strings, integers, booleans, null, arrays and
    objects, and doubles through :func:`_double_text`); anything it refuses (integers beyond 64 bits,
    non-finite numbers, lone surrogates, very deep nesting) goes to the stdlib encoder, which writes the
    same bytes or raises the precise :class:`NotJson`.
    """
    try:
        return _orjson_dumps(value, default=_double_text)
    except TypeError:
        return _utf8(_dumps(value))


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotJson("value holds a lone UTF-16 surrogate escape (like \\ud800), which has no UTF-8 form") from None


def _show(name: str) -> str:
    return repr(name if len(name) <= 40 else name[:40] + "...")


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
    except _DuplicateMember as exc:
        raise NotJson(
            f"value names the member {_show(exc.name)} twice in one object (readers disagree on which one counts)"
        ) from None
    except (ValueError, RecursionError) as exc:
        reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise NotJson(f"value is not usable JSON: {reason}") from None
    if not isinstance(document, dict):
        kind = "null" if document is None else _JSON_TYPES.get(type(document), "boolean")
        raise NotJsonObject(f"value is a JSON {kind}, not an object")
    if _ESCAPE in value:
        _json_bytes(document)  # a lone surrogate escape anywhere is refused, written back or not
    return document


def _decode_field(value: str) -> bytes:
    try:  # canonical base64 only: strict, padded, unused bits zero; a non-ASCII str is refused
        return sealed_envelope(value[_PREFIX_LEN:])
    except ValueError:  # binascii.Error is one
        raise MalformedEnvelope(f"encrypted field string is not valid base64 after {FIELD_PREFIX!r}") from None


def is_sealed_text(value: Any) -> bool:
    """True for a JSON string value that claims to be a sealed field (``sr1:``...)."""
    return isinstance(value, str) and value.startswith(FIELD_PREFIX)


def may_hold_envelopes(value: bytes) -> bool:
    """False only when no string of the document can start with ``sr1:`` (no prefix, no escape)."""
    return _FIELD_PREFIX_BYTES in value or _ESCAPE in value


def _check_spelling(raw: bytes, text: str, path: str) -> None:
    """Refuse the sealed field ``text`` unless ``raw`` spells it canonically (no JSON escapes)."""
    if text.isascii() and ('"' + text + '"').encode("ascii") in raw:
        return
    raise MalformedEnvelope(
        f"field {path} spells its {FIELD_PREFIX!r} string with JSON escapes; strongroom never writes that, "
        "so it was crafted to slip past byte-level checks"
    )


def _canonical(raw: bytes, text: str, path: str) -> bytes:
    """The envelope of the sealed field ``text``: valid base64, spelt canonically."""
    envelope = _decode_field(text)
    _check_spelling(raw, text, path)
    return envelope


class SealedField(NamedTuple):
    """One ``sr1:`` string of a parsed document: where it sits and its (parsed) envelope."""

    container: Any
    slot: Any
    path: str
    envelope: ParsedEnvelope


class FieldDocument:
    """A parsed field-mode document and its sealed fields, read strictly (see the module docstring).

    With ``rules``: the sealed fields at rule paths (canonical spelling checked), and the rule paths
    that hold a present value that is not sealed. Without: every ``sr1:`` string, each with the path
    derived from where it sits.
    """

    __slots__ = ("document", "plaintext_fields", "raw", "sealed")

    def __init__(self, raw: bytes, rules: FieldRules | None) -> None:
        self.raw = raw
        self.document = load_json_object(raw)
        self.sealed: list[SealedField] = []
        self.plaintext_fields: list[str] = []
        if rules is None:
            if may_hold_envelopes(raw):
                for container, slot, segments in _find_sealed(self.document):
                    path = _path_text(segments)
                    text = container[slot]
                    self.sealed.append(SealedField(container, slot, path, parse(_canonical(raw, text, path))))
            return
        for container, slot, path in _rule_slots(self.document, rules):
            current = container[slot]
            if is_sealed_text(current):
                self.sealed.append(SealedField(container, slot, path, parse(_canonical(raw, current, path))))
            else:
                self.plaintext_fields.append(f"{path} (a JSON {_json_type(current)})")

    def key_refs(self) -> list[KeyRef]:
        """Every key the sealed fields need, once each, in document order."""
        return list(dict.fromkeys(f.envelope.key_ref for f in self.sealed))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else _JSON_TYPES.get(type(value), "value")


def _rule_slots(document: dict[str, Any], rules: FieldRules) -> list[tuple[Any, Any, str]]:
    """(container, key or index, canonical rule path) of every present value the rules select."""
    slots: list[tuple[Any, Any, str]] = []
    for path in rules.paths:
        if len(path.segments) == 1 and path.segments[0] is not WILDCARD:  # a top-level member: most rules
            if path.segments[0] in document:
                slots.append((document, path.segments[0], path.text))
            continue
        *parents, last = path.segments
        nodes: list[Any] = [document]
        for segment in parents:
            nodes = _step(nodes, segment)
        for node in nodes:
            slots.extend((container, slot, path.text) for container, slot in _slots(node, last))
    return slots


def rule_value_count(value: bytes, rules: FieldRules) -> int:
    """How many values the rules select in the JSON object ``value`` (present ones, sealed or not):
    at most what :func:`encrypt_json_fields` seals. Without ``[*]`` paths that is the number of paths,
    and ``value`` is not read; otherwise it must be a JSON object."""
    if rules.fixed_value_count is not None:
        return rules.fixed_value_count
    return len(_rule_slots(load_json_object(value), rules))


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

    A selected value that is already an ``sr1:`` envelope is kept only if it opens under ``dek`` for
    this topic, subject and field (a re-run of an at-least-once writer); otherwise
    :class:`UnverifiedEnvelope`. An ``sr1:`` string anywhere else is :class:`StrayEnvelope`.
    """
    if not isinstance(rules, FieldRules):
        rules = _compiled(tuple(rules))
    if NATIVE and rules.top_members is not None and type(value) is bytes:
        sealed = _seal_members(value, rules, dek, key_ref, ctx, usage)
        if sealed is not None:
            return sealed
    document = load_json_object(value)
    targets = _rule_slots(document, rules)
    if may_hold_envelopes(value):
        _refuse_strays(document, {(id(c), s) for c, s, _ in targets})
    changed = False
    for container, slot, path in targets:
        current = container[slot]
        if is_sealed_text(current):
            _verify_presealed(value, current, dek, ctx, path)
            continue
        envelope = seal(_json_bytes(current), dek, key_ref, ctx, path, usage=usage)
        container[slot] = FIELD_PREFIX + _b2a_base64(envelope, newline=False).decode("ascii")
        changed = True
    return _json_bytes(document) if changed else value


def _seal_members(
    value: bytes, rules: FieldRules, dek: bytes, key_ref: KeyRef, ctx: RecordContext, usage: DekUsage | None
) -> bytes | None:
    """:func:`encrypt_json_fields` for rules of top-level members, read and written by the native reader: the
    same bytes, seals and charges, in rule order. None, before anything is sealed, when the Python path must
    read the value: the native reader was not sure of it, or a string in it starts with ``sr1:`` (a stray or a
    re-run's envelope, which only the Python path judges)."""
    names = _member_bytes(rules.top_members)
    scanned = _native_canonical(value, names, True) if names is not None else None
    if scanned is None or scanned[2]:
        return None
    text, _, _, spans = scanned
    found = [(spans[2 * i], spans[2 * i + 1], path.text) for i, path in enumerate(rules.paths) if spans[2 * i] >= 0]
    if not found:
        return value  # no rule matched: the value as it came, as the Python path returns it
    pieces: list[tuple[int, int, bytes]] = []
    for start, end, path in found:  # rule order, as the Python path seals (and charges)
        envelope = seal(text[start:end], dek, key_ref, ctx, path, usage=usage)
        pieces.append((start, end, _b2a_base64(envelope, newline=False)))
    pieces.sort()
    out: list[bytes] = []
    at = 0
    for start, end, encoded in pieces:
        out += (text[at:start], _SEALED_QUOTE, encoded, b'"')
        at = end
    out.append(text[at:])
    return b"".join(out)


def _open_members(
    value: bytes,
    rules: FieldRules,
    key_lookup: KeyLookup,
    ctx: RecordContext,
    topic_map: Mapping[str, str] | None,
    on_erased: str,
) -> bytes | None:
    """:func:`decrypt_json_fields` with rules of top-level members, for a value already in canonical form (what
    strongroom writes): the same lookups, openings, errors and bytes. None, before any key is looked up, when the
    Python path must read the value: the native reader was not sure of it, it is not canonical, or a rule field
    holds something other than a well-formed envelope (the Python path names the problem)."""
    names = _member_bytes(rules.top_members)
    scanned = _native_canonical(value, names, True) if names is not None else None
    if scanned is None or not scanned[1]:
        return None
    spans = scanned[3]
    fields: list[tuple[int, int, str, ParsedEnvelope]] = []
    for i, rule in enumerate(rules.paths):
        start, end = spans[2 * i], spans[2 * i + 1]
        if start < 0:
            continue
        if value[start : start + _SEALED_START] != _SEALED_QUOTE:
            return None  # plaintext at a rule field: UnencryptedField from the Python path
        try:
            fields.append((start, end, rule.text, parse(sealed_envelope(value[start + _SEALED_START : end - 1]))))
        except (ValueError, EnvelopeError):
            return None
    if not fields:
        return value
    keys: dict[bytes, bytes | None] = {}  # by envelope header: one lookup per key per document
    pieces: list[tuple[int, int, bytes]] = []
    for start, end, path, parsed in fields:
        if parsed.header in keys:
            dek = keys[parsed.header]
        else:
            dek = keys[parsed.header] = key_lookup(parsed.key_ref)
        if dek is None:
            if on_erased == "raise":
                raise SubjectErased(
                    f"field {path} of subject {subject_fingerprint(ctx.subject)} was sealed with "
                    f"the erased key {parsed.key_ref!r}"
                )
            pieces.append((start, end, _NULL))
            continue
        plain = open_envelope(parsed, dek, ctx, path, topic_map=topic_map)
        checked = _native_canonical(plain, (), False)
        if checked is None or not checked[1]:  # not as strongroom writes it: read and written as the Python path does
            plain = _json_bytes(_field_json(plain, path))
        pieces.append((start, end, plain))
    pieces.sort()
    out: list[bytes] = []
    at = 0
    for start, end, plain in pieces:
        out += (value[at:start], plain)
        at = end
    out.append(value[at:])
    return b"".join(out)


@functools.lru_cache(maxsize=256)
def _member_bytes(members: tuple[str, ...] | None) -> tuple[bytes, ...] | None:
    """The canonical spelling of each member name (inside its quotes), as the native reader compares them."""
    if members is None:
        return None
    try:
        return tuple(_json_bytes(name)[1:-1] for name in members)
    except NotJson:  # a lone surrogate: no such member can be read
        return None


class NativeMembers(NamedTuple):
    """What the native sealer and opener of top-level rule fields (``crypto._gcm.seal_fields`` /
    ``open_fields``) take for a rule set: per rule, in rule order, the member's canonical name bytes and the end
    of its fields' AAD (u16 length ‖ the canonical rule path, :func:`~strongroom.envelope.aad.new_aad_frame`'s
    suffix)."""

    names: tuple[bytes, ...]
    aad_suffixes: tuple[bytes, ...]


@functools.lru_cache(maxsize=256)
def native_members(rules: FieldRules) -> NativeMembers | None:
    """The :class:`NativeMembers` of ``rules``; None when a rule is not one top-level member (or names one no
    document can hold), which leaves every record to the Python path."""
    names = _member_bytes(rules.top_members)
    if names is None:
        return None
    suffixes = tuple(new_aad_frame(b"", "", path.text)[1] for path in rules.paths)
    return NativeMembers(names, suffixes)


def _refuse_strays(document: dict[str, Any], targets: set[tuple[int, Any]]) -> None:
    for container, slot, segments in _find_sealed(document):
        if (id(container), slot) not in targets:
            raise StrayEnvelope(
                f"field {_path_text(segments)} holds an {FIELD_PREFIX!r} string but is not one of the rule's "
                "fields; strongroom will not pass on something that looks encrypted where nothing is"
            )


def _verify_presealed(raw: bytes, text: str, dek: bytes, ctx: RecordContext, path: str) -> None:
    _check_spelling(raw, text, path)  # an escaped spelling is refused as such
    try:
        open_envelope(parse(_decode_field(text)), dek, ctx, path)
    except EnvelopeError as exc:
        raise UnverifiedEnvelope(
            f"field {path} already holds an {FIELD_PREFIX!r} string that does not open under this subject's key "
            f"for this topic and field ({type(exc).__name__})"
        ) from None


def decrypt_json_fields(
    value: bytes | FieldDocument,
    key_lookup: KeyLookup,
    ctx: RecordContext,
    *,
    topic_map: Mapping[str, str] | None = None,
    on_erased: OnErasedField | str = OnErasedField.NULL,
    expect_encrypted: FieldRules | Sequence[str] | None = None,
) -> bytes:
    """Open the sealed fields of the JSON object ``value``; all or nothing.

    ``key_lookup`` returns the DEK for a key reference, or None if it was erased: the field then
    becomes ``null`` (``on_erased="null"``) or :class:`SubjectErased` is raised. Any other failure
    raises and nothing is returned, so a caller never sees a half-decrypted document.

    Field mode authenticates each encrypted value, not the rest of the document: someone who can
    rewrite records could replace an ``sr1:`` string with a plaintext value. Readers that know the
    topic's rules pass them as ``expect_encrypted``: only the rule fields are opened (an ``sr1:``
    string elsewhere is left as it is), and a present value at one of them that is not an envelope
    raises :class:`UnencryptedField`. ``value`` may be a :class:`FieldDocument` already parsed with
    the same rules.
    """
    if on_erased not in tuple(OnErasedField):
        raise ValueError(f"on_erased must be 'null' or 'raise', got {on_erased!r}")
    rules = None
    if expect_encrypted is not None:
        rules = expect_encrypted if isinstance(expect_encrypted, FieldRules) else _compiled(tuple(expect_encrypted))
        if NATIVE and rules.top_members is not None and type(value) is bytes:
            opened = _open_members(value, rules, key_lookup, ctx, topic_map, on_erased)
            if opened is not None:
                return opened
    doc = value if isinstance(value, FieldDocument) else FieldDocument(value, rules)
    if doc.plaintext_fields:
        raise UnencryptedField(f"field {doc.plaintext_fields[0]} should be encrypted but holds plaintext")
    if not doc.sealed:
        return doc.raw
    keys: dict[bytes, bytes | None] = {}  # by envelope header: one lookup per key per document
    replacements: list[tuple[Any, Any, Any]] = []
    for field in doc.sealed:
        parsed = field.envelope
        if parsed.header in keys:
            dek = keys[parsed.header]
        else:
            dek = keys[parsed.header] = key_lookup(parsed.key_ref)
        if dek is None:
            if on_erased == "raise":
                raise SubjectErased(
                    f"field {field.path} of subject {subject_fingerprint(ctx.subject)} was sealed with "
                    f"the erased key {parsed.key_ref!r}"
                )
            replacements.append((field.container, field.slot, None))
            continue
        replacements.append((field.container, field.slot, _open_field(parsed, dek, ctx, field.path, topic_map)))
    for container, slot, plain in replacements:
        container[slot] = plain
    return _json_bytes(doc.document)


def _open_field(
    parsed: ParsedEnvelope,
    dek: bytes,
    ctx: RecordContext,
    path_text: str,
    topic_map: Mapping[str, str] | None,
) -> Any:
    return _field_json(open_envelope(parsed, dek, ctx, path_text, topic_map=topic_map), path_text)


def _field_json(plaintext: bytes, path_text: str) -> Any:
    """The JSON value a sealed field's plaintext holds, exactly as :func:`load_json_object` would read it."""
    try:  # orjson reads a string, integer, boolean or null exactly as the stdlib does, in a tenth of the time
        value = _orjson_loads(plaintext)
        if type(value) in _SCALARS:
            return value
    except orjson.JSONDecodeError:
        pass  # what orjson refuses (lone surrogate escapes, integers beyond 64 bits) the stdlib judges
    try:  # doubles (their own type), objects and arrays (duplicate members refused) as load_json_object reads them
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
