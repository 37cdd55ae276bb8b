"""Errors of the durability audit. Each names the bad value and the operator's next step."""

from __future__ import annotations

from strongroom.errors import AuditError


class LedgerNotFound(AuditError):
    """The ledger path holds no ledger (nothing captured yet, or a wrong path)."""

    default_hint = "run `strongroom audit ledger --once` first, or pass the --ledger path you captured to"


class TopicNotFound(AuditError):
    """An audited topic does not exist on the cluster."""

    default_hint = "check the --topic names with `kafka-topics --list`"


class KafkaReadError(AuditError):
    """Reading a partition's log for the audit failed or stalled."""

    default_hint = "check that the partition has a leader and the brokers are reachable"


class OperationsLogError(AuditError):
    """The operations log topic could not be created, written or read."""

    default_hint = "check that the cluster is reachable and allows creating the strongroom-operations topic"


class InvalidDuration(AuditError):
    """A duration option could not be parsed."""

    default_hint = "use a number with a unit: 500ms, 30s, 5m, 1h, 7d"
