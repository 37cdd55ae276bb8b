"""Client properties files (``--command-config``, ``doctor client --config``): the ``.properties`` format that
Kafka's own tools read with ``java.util.Properties``, read the same way, except where reading it silently
would hide a mistake.

As Java reads them: ``name=value``, ``name: value`` and ``name value``; ``#`` and ``!`` comments; a line that
ends in an odd number of backslashes continues on the next one; ``\\t``, ``\\n``, ``\\r``, ``\\f``,
``\\uXXXX`` and ``\\<any>`` escapes. As Kafka's configuration then sees them: values trimmed.

Refused, with the line number and never the line's text (it may hold a password): a property set twice (Java
keeps the last one silently, so a reviewer reading the first is misled: ``security.protocol=SASL_SSL`` above a
later ``security.protocol=PLAINTEXT``), a name that is not letters, digits, ``.``, ``_`` or ``-``, a line with a
name and no value at all (a pasted secret reads exactly so), and a malformed ``\\uXXXX`` escape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from strongroom.errors import ConfigError

_NATURAL_LINE: Final = re.compile(r"\r\n|\r|\n")
_WHITESPACE: Final = " \t\f"
_SEPARATORS: Final = "=:"
_PROPERTY_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
NOT_SHOWN: Final = "the line is not shown: it may hold a secret"


class PropertiesFileError(ConfigError):
    """A properties file that cannot be read as it was meant (the message names the line, never its text)."""


def read_properties_file(path: str) -> dict[str, str]:
    """The properties of the file at ``path`` (``OSError`` and ``UnicodeDecodeError`` as ``open`` raises them). A
    UTF-8 byte-order mark, which Windows editors write, is not part of the first name."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return parse_properties(fh.read(), source=path)


def parse_properties(text: str, *, source: str = "properties") -> dict[str, str]:
    """``text`` as ``{name: value}``; :class:`PropertiesFileError` for what the module docstring refuses."""
    properties: dict[str, str] = {}
    set_on: dict[str, int] = {}
    for number, line in _logical_lines(text):
        name, value, explicit = _name_and_value(line, number, source)
        if not _PROPERTY_NAME.fullmatch(name):
            raise PropertiesFileError(
                f"{source}: line {number} does not start with a property name ({NOT_SHOWN})",
                hint="write name=value, the name in letters, digits, '.', '_' and '-'",
            )
        if not explicit and not value:
            raise PropertiesFileError(
                f"{source}: line {number} holds a single word and no value ({NOT_SHOWN})",
                hint="write name=value (name= for an empty value), or remove the line",
            )
        if name in properties:
            raise PropertiesFileError(
                f"{source}: {name!r} is set on line {set_on[name]} and again on line {number}",
                hint="keep one of them: which one counts would otherwise be a guess",
            )
        properties[name], set_on[name] = value.strip(_WHITESPACE), number
    return properties


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of its first natural line, the logical line): comments and blank lines left out, continuations
    joined (the backslash, the line break and the next line's leading whitespace dropped)."""
    pending: list[str] = []
    start = 0
    for number, natural in enumerate(_NATURAL_LINE.split(text), start=1):
        line = natural.lstrip(_WHITESPACE)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = []
    if pending:  # the file ended inside a continuation
        yield start, "".join(pending)


def _name_and_value(line: str, number: int, source: str) -> tuple[str, str, bool]:
    """The unescaped name, the unescaped value, and whether an ``=`` or ``:`` separated them (whitespace
    alone separates a name from a value, but a name alone has neither)."""
    name: list[str] = []
    at = 0
    while at < len(line) and line[at] not in _SEPARATORS and line[at] not in _WHITESPACE:
        at = _take(line, at, name, number, source)
    while at < len(line) and line[at] in _WHITESPACE:
        at += 1
    explicit = at < len(line) and line[at] in _SEPARATORS
    if explicit:
        at += 1
        while at < len(line) and line[at] in _WHITESPACE:
            at += 1
    value: list[str] = []
    while at < len(line):
        at = _take(line, at, value, number, source)
    return _text(name, number, source), _text(value, number, source), explicit


def _text(chars: list[str], number: int, source: str) -> str:
    """The characters as text, ``\\uXXXX`` surrogate pairs joined as Java joins them; a lone one is refused."""
    text = "".join(chars)
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise PropertiesFileError(
            f"{source}: line {number} has a \\uXXXX escape that is half of a character ({NOT_SHOWN})",
            hint="escape a character outside the BMP as its two halves, high then low",
        ) from None


def _take(line: str, at: int, into: list[str], number: int, source: str) -> int:
    """Append the (unescaped) character at ``at`` to ``into``; return where the next one starts."""
    if line[at] != "\\" or at + 1 >= len(line):
        into.append(line[at])
        return at + 1
    escaped = line[at + 1]
    if escaped != "u":
        into.append(_ESCAPES.get(escaped, escaped))
        return at + 2
    digits = line[at + 2 : at + 6]
    if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise PropertiesFileError(
            f"{source}: line {number} has a malformed \\uXXXX escape ({NOT_SHOWN})",
            hint="write four hexadecimal digits after \\u, or \\\\ for a backslash",
        )
    into.append(chr(int(digits, 16)))
    return at + 6
