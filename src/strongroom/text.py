"""Plain-text rendering shared by the CLI, the demo and the reports, and the one parser of JSON/YAML settings
text that may hold secrets (no I/O, no click)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_secret_text(text: str, *, yaml_syntax: bool) -> Any:
    """Parse JSON (or YAML) settings that may hold secrets (a Vault token): a syntax error names the line and
    column and what is wrong, never the text around it, which parsers like to quote and which may be the
    secret. Raises ``ValueError``."""
    if not yaml_syntax:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{exc.problem or exc.context or 'invalid YAML'}{where}") from None
    except yaml.YAMLError:
        raise ValueError("invalid YAML") from None
