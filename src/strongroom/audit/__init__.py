"""Durability audit: ledger, scrub, sensitive-operation watcher, scores and report.

The operations log, which other tools write to before they delete anything, is exported here and
imported on first use (the audit's Spark executors import only what they read with)::

    from strongroom.audit import DELETE_RECORDS, Operation, OperationsLog, PartitionChange
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strongroom.audit.errors import OperationsLogError
    from strongroom.audit.oplog import DELETE_RECORDS, Operation, OperationsLog, PartitionChange

_EXPORTS = {
    "DELETE_RECORDS": "strongroom.audit.oplog",
    "Operation": "strongroom.audit.oplog",
    "OperationsLog": "strongroom.audit.oplog",
    "OperationsLogError": "strongroom.audit.errors",
    "PartitionChange": "strongroom.audit.oplog",
}

__all__ = ["DELETE_RECORDS", "Operation", "OperationsLog", "OperationsLogError", "PartitionChange"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'strongroom.audit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
