"""Leaf errors of lost-KEK recovery. Each names the bad value and the operator's next step.

Two rules shape them: a transient KMS failure is never reported as a lost key (it aborts the scan
with :class:`ScanAborted`, nothing is written), and a plan that does not match the cluster it is
applied to is refused before anything is changed (:class:`PlanRejected`).
"""

from __future__ import annotations

from strongroom.errors import RecoveryError


class UnknownRecordFormat(RecoveryError):
    """A ``--format`` or KMS choice this strongroom cannot read."""

    default_hint = "use --format strongroom or --format kroxylicious (with --kms vault|aws|inmemory)"


class ScanAborted(RecoveryError):
    """The scan could not decide whether records are readable (KMS outage, access denied, Kafka error).

    Nothing is written: a plan built on a guess could delete readable data.
    """

    default_hint = "fix the cause named above and run the scan again; no plan was written"


class PlanInvalid(RecoveryError):
    """A plan file that is not a strongroom recovery plan (unreadable, wrong version, missing fields)."""

    default_hint = "pass the JSON file written by `strongroom recover scan --plan-out`"


class PlanRejected(RecoveryError):
    """A plan that was edited by hand, or belongs to another cluster or topic state."""

    default_hint = "run `strongroom recover scan` again against this cluster and apply the fresh plan"


class GroupActive(RecoveryError):
    """A consumer group that still has members cannot have its offsets reset."""

    default_hint = "stop every member of the group (the offsets of an active group cannot be changed), then re-run"


class ApplyRefused(RecoveryError):
    """The requested action does not fit the plan (scattered loss, nothing to do, missing group)."""

    default_hint = "see `strongroom recover apply --help` and the plan's remedy"


class VerificationFailed(RecoveryError):
    """After applying, the cluster is not where the plan said it would be."""

    default_hint = "inspect the partitions named above with kafka-get-offsets / kafka-consumer-groups"
