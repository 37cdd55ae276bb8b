"""Output formats for commands: one class per format, chosen by the global ``--output`` option.

A command builds one result object - a JSON-serialisable dict - plus a text rendering of it, and hands
both to :meth:`Output.result`. ``--output json`` prints exactly one JSON document on stdout, so
scripts can parse it; progress and notes always go to stderr in both formats.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import click


class Output:
    """Base: progress and notes on stderr; subclasses decide how results look on stdout."""

    name = "text"

    def __init__(self) -> None:
        self._last_progress = 0.0

    def result(self, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
        raise NotImplementedError

    def note(self, message: str) -> None:
        click.echo(message, err=True)

    def progress(self, message: str, *, done: int | None = None, total: int | None = None, force: bool = False) -> None:
        """Rate-limited progress for long work (scans, scrubs): at most a line every half second."""
        now = time.monotonic()
        if not force and now - self._last_progress < 0.5:
            return
        self._last_progress = now
        self.emit_progress(message, done, total)

    def emit_progress(self, message: str, done: int | None, total: int | None) -> None:
        suffix = ""
        if done is not None and total:
            suffix = f" {done}/{total} ({100.0 * done / total:.0f}%)"
        elif done is not None:
            suffix = f" {done}"
        click.echo(f"... {message}{suffix}", err=True)


class TextOutput(Output):
    name = "text"

    def result(self, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
        if callable(text):
            rendered = text(data)
        elif text is not None:
            rendered = text
        else:
            rendered = json.dumps(data, indent=2, default=str)
        click.echo(rendered)


class JsonOutput(Output):
    name = "json"

    def result(self, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))

    def emit_progress(self, message: str, done: int | None, total: int | None) -> None:
        click.echo(json.dumps({"progress": message, "done": done, "total": total}), err=True)


FORMATS: dict[str, type[Output]] = {"text": TextOutput, "json": JsonOutput}
