"""Where the audit keeps its tables, under one root path (the ``--ledger`` path).

::

    <ledger>/records/      captured log rows, Parquet via Spark's file sink, partitioned by topic and kind
                           (kind=record: one row per record; kind=range: the offset ranges read)
    <ledger>/checkpoint/   the capture query's Spark checkpoint (default location)
    <ledger>/deliveries/   rows appended from producer delivery reports (optional)
    <ledger>/scrubs/       scrub history: counts/ and findings/ (Parquet), summaries/<run>.json
    <ledger>/alerts/       the watcher's alerts as JSON lines (local ledgers)

Any Spark-supported path works for Spark-written tables (``s3a://...``, ``hdfs://...``); the
JSON files (summaries, alerts) and the pyarrow readers used by the watcher and the report need a local
path or a filesystem pyarrow knows (``s3://``, ``gs://``, ``hdfs://``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from strongroom.paths import home_dir

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def default_ledger_path() -> str:
    return str(home_dir() / "ledger")


@dataclass(frozen=True)
class LedgerPaths:
    root: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", self.root.rstrip("/") or "/")

    def _join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    @property
    def records(self) -> str:
        return self._join("records")

    @property
    def checkpoint(self) -> str:
        return self._join("checkpoint")

    @property
    def deliveries(self) -> str:
        return self._join("deliveries")

    @property
    def scrub_counts(self) -> str:
        return self._join("scrubs", "counts")

    @property
    def scrub_findings(self) -> str:
        return self._join("scrubs", "findings")

    @property
    def scrub_summaries(self) -> str:
        return self._join("scrubs", "summaries")

    @property
    def alerts(self) -> str:
        return self._join("alerts")

    @property
    def is_local(self) -> bool:
        return not _SCHEME.match(self.root) or self.root.startswith("file://")

    def local(self, path: str) -> Path:
        """A local filesystem path for one of the paths above (``file://`` stripped)."""
        return Path(path[len("file://") :] if path.startswith("file://") else path)
