"""Small parsers shared by the audit commands (durations like ``5s``, ``1h``, ``7d``)."""

from __future__ import annotations

import re

from strongroom.audit.errors import InvalidDuration

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")


def parse_duration_ms(text: str) -> int:
    """``"90s"`` -> 90000. A bare number means seconds. Zero and negatives are refused."""
    match = _DURATION.match(text)
    if not match:
        raise InvalidDuration(f"cannot read the duration {text!r}")
    value = float(match.group(1)) * _UNITS_MS[match.group(2) or "s"]
    if value <= 0:
        raise InvalidDuration(f"the duration {text!r} must be positive")
    return int(value)


def format_duration_ms(ms: int) -> str:
    """The shortest exact rendering: 3600000 -> ``1h``, 90000 -> ``90s``."""
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNITS_MS[unit]
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
