"""Leaf errors of the encrypting producer and the decrypting consumer.

Every record-level error names the record's coordinates (topic, partition, offset; or, before a
record has an offset, its topic and a fingerprint of its key) and why. None carries plaintext, a key
or a DEK: record keys may be personal data, so only their fingerprint appears.
"""

from __future__ import annotations

from strongroom.errors import KafkaError, PipelineError, StrongroomError


class RecordRejected(PipelineError):
    """The producer cannot encrypt a record (no subject, not a JSON object in field mode, too large).

    Nothing was written for it: it is never sent in plaintext to the encrypted topic.
    """

    default_hint = (
        "fix the record or the rule, or give the producer a dead_letter_topic and set the rule's "
        "on_reject to dead-letter"
    )

    def __init__(self, problem: str, *, topic: str, reason: str, hint: str | None = None) -> None:
        super().__init__(problem, hint=hint)
        self.topic = topic
        self.reason = reason


class DecryptFailed(PipelineError):
    """The consumer cannot decrypt a record under the ``fail`` policy (lost KEK, tampered, unknown format).

    The consumer has seeked back to the record: the next ``poll`` delivers it again, so an application
    that retries after the cause is fixed (the KEK restored) continues without a restart.
    """

    default_hint = (
        "restore the KEK named above (enable it, cancel its deletion) and poll again, run "
        "`strongroom recover scan` if it is gone, or use on_failure='dead-letter' or 'skip'"
    )

    def __init__(
        self,
        problem: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        reason: str,
        cause: StrongroomError | None = None,
        kek_ref: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(problem, hint=hint)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = reason
        self.cause = cause
        self.kek_ref = kek_ref


class KmsOutage(PipelineError):
    """The KMS stayed unreachable longer than the consumer waits; the record is not lost, only late."""

    default_hint = "restore the KMS and poll again: the consumer resumes at the record named above"


class DeliveryFailed(KafkaError):
    """Records the producer accepted could not be delivered to Kafka (and no on_delivery callback took them)."""

    default_hint = "check the brokers and the topic named above, then produce the records again"


class ClientClosed(KafkaError):
    """The producer or consumer was used after ``close()``."""

    default_hint = "create a new client"
