"""Field paths for JSON field mode: ``$.a.b``, ``$.items[*].email``, ``$["odd key"]``.

A path is a sequence of object member names and ``[*]`` (every element of an array). Array indices
are not supported on purpose: the path is bound into each field's AAD, and ``[*]`` keeps an
encrypted field valid when producers legitimately reorder an array.

Every path has one *canonical* text, and that text is what the AAD binds: the decryptor does not
know the rules, it derives the path of each encrypted string from where it finds it, so both sides
must spell a location the same way. A member name is written ``.name`` when it is made only of
"plain" characters (anything except ``. [ ] " ' $ \\``, whitespace and control characters) and
``["name"]`` (a JSON string) otherwise; an array step is always ``[*]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Final

from strongroom.envelope.errors import InvalidFieldPath

#: The segment that stands for "every element of an array".
WILDCARD: Final = None

Segment = str | None

_PLAIN_NAME: Final = re.compile(r"[^.\[\]\"'$\\\s\x00-\x1f\x7f]+")
_DECODER: Final = json.JSONDecoder()


def render_segment(segment: Segment) -> str:
    """The canonical text of one segment."""
    if segment is None:
        return "[*]"
    if _PLAIN_NAME.fullmatch(segment):
        return "." + segment
    return "[" + json.dumps(segment, ensure_ascii=False) + "]"


def render_path(segments: Iterable[Segment]) -> str:
    """The canonical text of a path (what the AAD binds)."""
    return "$" + "".join(render_segment(segment) for segment in segments)


class FieldPath:
    """A parsed field path: its segments and its canonical text."""

    __slots__ = ("segments", "text")

    def __init__(self, segments: Sequence[Segment]) -> None:
        if not segments or segments[0] is None:
            raise InvalidFieldPath(
                f"field path {render_path(segments)!r} must start with a member name (the value is a JSON object)"
            )
        self.segments: tuple[Segment, ...] = tuple(segments)
        self.text = render_path(self.segments)

    @classmethod
    def parse(cls, text: str) -> FieldPath:
        """Parse ``text``; :class:`InvalidFieldPath` names the offending position."""
        if not text.startswith("$"):
            raise InvalidFieldPath(f"field path {text!r} must start with '$'")
        segments: list[Segment] = []
        pos = 1
        while pos < len(text):
            pos = _parse_segment(text, pos, segments)
        if not segments:
            raise InvalidFieldPath(f"field path {text!r} names the whole value; use whole-value mode instead")
        return cls(segments)

    def is_prefix_of(self, other: FieldPath) -> bool:
        return other.segments[: len(self.segments)] == self.segments

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldPath) and other.segments == self.segments

    def __hash__(self) -> int:
        return hash(self.segments)

    def __repr__(self) -> str:
        return f"FieldPath({self.text!r})"


def _parse_segment(text: str, pos: int, out: list[Segment]) -> int:
    char = text[pos]
    if char == ".":
        match = _PLAIN_NAME.match(text, pos + 1)
        if match is None:
            raise InvalidFieldPath(
                f"field path {text!r}: expected a member name at offset {pos + 1} "
                '(use ["..."] for names with special characters)'
            )
        out.append(match.group())
        return match.end()
    if char == "[":
        if text.startswith("[*]", pos):
            out.append(WILDCARD)
            return pos + 3
        if text.startswith('["', pos):
            try:
                name, end = _DECODER.raw_decode(text, pos + 1)
            except json.JSONDecodeError:
                raise InvalidFieldPath(f"field path {text!r}: bad quoted name at offset {pos + 1}") from None
            if not text.startswith("]", end):
                raise InvalidFieldPath(f"field path {text!r}: expected ']' at offset {end}")
            out.append(name)
            return end + 1
        raise InvalidFieldPath(
            f'field path {text!r}: at offset {pos} only [*] and ["name"] are allowed '
            "(array indices are not supported: use [*])"
        )
    raise InvalidFieldPath(f"field path {text!r}: unexpected {char!r} at offset {pos}")


class FieldRules:
    """A checked set of field paths to encrypt. Compile once per topic, reuse for every record."""

    __slots__ = ("fixed_value_count", "paths", "top_members")

    def __init__(self, paths: Iterable[str | FieldPath]) -> None:
        parsed = [p if isinstance(p, FieldPath) else FieldPath.parse(p) for p in paths]
        for i, first in enumerate(parsed):
            for second in parsed[i + 1 :]:
                if first.is_prefix_of(second) or second.is_prefix_of(first):
                    raise InvalidFieldPath(
                        f"field paths {first.text!r} and {second.text!r} overlap; encrypt the outer one only"
                    )
        self.paths: tuple[FieldPath, ...] = tuple(parsed)
        #: How many values the rules select in any record at most, when that is fixed (no ``[*]`` step: each
        #: path selects one value or none); None when it depends on the record's arrays.
        self.fixed_value_count: int | None = None if any(WILDCARD in path.segments for path in parsed) else len(parsed)
        #: The member names, in rule order, when every path is one top-level member (``$.name``, most rules).
        self.top_members: tuple[str, ...] | None = (
            tuple(str(path.segments[0]) for path in parsed) if all(len(path.segments) == 1 for path in parsed) else None
        )

    def __repr__(self) -> str:
        return f"FieldRules({[p.text for p in self.paths]!r})"
