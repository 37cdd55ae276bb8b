"""The one error hierarchy of strongroom.

Every error strongroom raises on purpose derives from :class:`StrongroomError`. Each carries the
problem (what is wrong, naming the bad value) and a ``hint`` (what the operator should do next).
The CLI prints ``error: <problem> (<hint>)`` on one line and exits 1; nothing else is shown.

Areas subclass the per-area roots below with their own leaves, so a caller can catch a whole area
(``except KmsError``) or one precise condition (``except KekNotFound``).

Messages must never contain secrets: no DEKs, no KMS tokens, no plaintext record content.
"""

from __future__ import annotations


class StrongroomError(Exception):
    """Root of every error strongroom raises deliberately."""

    #: The default next step, used when a raise site gives none.
    default_hint: str = "see the strongroom documentation"

    def __init__(self, problem: str, *, hint: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.problem} ({self.hint})"


class ConfigError(StrongroomError):
    """A configuration value, option or file is invalid."""

    default_hint = "fix the configuration value named above"


class StackError(StrongroomError):
    """The local stack (Java, Maven, Kafka, OpenBao, moto, Spark) could not be set up or started."""

    default_hint = "see the log file named above"


class KafkaError(StrongroomError):
    """Kafka is unreachable or refused an operation."""

    default_hint = "check --bootstrap-server and that the brokers are up"


class EnvelopeError(StrongroomError):
    """A record's encrypted envelope could not be parsed or authenticated."""

    default_hint = "the record is not a valid strongroom envelope"


class KmsError(StrongroomError):
    """The key management service failed or refused a request."""

    default_hint = "check the KMS address, credentials and the key's state"


class KeysError(StrongroomError):
    """Per-subject key lifecycle problems (keys topic, key table, erasure)."""

    default_hint = "check the keys topic"


class PipelineError(StrongroomError):
    """An encrypt/decrypt pipeline stopped on a record it must not pass."""

    default_hint = "see the record coordinates above and the pipeline's failure policy"


class AuditError(StrongroomError):
    """Durability audit problems (ledger, scrub, watcher, report)."""

    default_hint = "check the ledger path and the audited topics"


class RecoveryError(StrongroomError):
    """Lost-KEK recovery problems (inventory, scan, plan, apply)."""

    default_hint = "re-run the scan to produce a fresh plan"


class DoctorError(StrongroomError):
    """Doctor could not inspect the cluster or the client configuration."""

    default_hint = "check --bootstrap-server and --command-config"
