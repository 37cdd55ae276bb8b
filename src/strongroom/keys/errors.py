"""Leaf errors of the keys area (keys topic, key table, key creation, erasure and its verification).

Messages name the bad value and the operator's next step. They never carry key material; a subject
id may appear (it is what an operator types into ``strongroom erase``), plaintext never.
"""

from __future__ import annotations

from strongroom.envelope.errors import SubjectErased
from strongroom.errors import ConfigError, KeysError


class KeysTopicMissing(KeysError):
    """The keys topic does not exist (or this client may not see it)."""

    default_hint = "create it with `strongroom keys create-topic`, or check --keys-topic and the ACLs"


class KeysTopicResized(KeysError):
    """The keys topic has a different partition count from the one it was created with.

    Every record of a subject must live in one partition (murmur2(subject) % partitions); adding
    partitions moves subjects and breaks the ordering that makes creation race-free and erasure final.
    """

    default_hint = (
        "never add partitions to the keys topic; restore the original count by copying the topic "
        "into a new one with `strongroom keys create-topic` and re-pointing every application"
    )


class CorruptKeyRecord(KeysError):
    """A keys-topic record that does not parse, or has a version this strongroom does not know."""

    default_hint = "the record is skipped and counted; upgrade strongroom if it was written by a newer version"


class KeyCreationFailed(KeysError):
    """New subject keys could not be made durable in the keys topic; none of them may be used."""

    default_hint = "nothing was encrypted with these keys; retry the batch once Kafka accepts writes again"


class KeyTableTimeout(KeysError):
    """The key table did not reach the requested offsets in time."""

    default_hint = "check that the brokers are up and the keys topic is readable; then retry"


class KeyTableClosed(KeysError):
    """The key table was used after :meth:`close` or its reader thread died."""

    default_hint = "create a new KeyTable; see the reader's last error above"


class KeyNotYetAvailable(KeysError):
    """A record names a subject key this reader has not seen yet (keys can lag data on mirrors)."""

    default_hint = "buffer the record and retry after the key table has caught up"


class WrappingKeyUnavailable(KeysError):
    """The wrapping key of a subject key is unknown or corrupt in the keys topic."""

    default_hint = "check the keys topic for the wrapping-key record named above (`strongroom keys inventory`)"


class SubjectKeyLost(SubjectErased):
    """A subject key whose wrapping key was *declared lost* (``strongroom recover mark-lost``).

    A subclass of :class:`~strongroom.envelope.SubjectErased` on purpose: every reader that already
    handles erased subjects (JSON fields become null, whole values are dropped or marked) handles
    these the same way, deliberately — no KMS call, no waiting, no failure. Catch this class first to
    count such records separately. ``plan_id`` is the recovery plan that declared the loss.
    """

    default_hint = (
        "the key's KEK was lost and the operator declared its keys lost; if the KEK is restored, run "
        "`strongroom recover unmark-lost --wk <id> --execute`"
    )

    def __init__(
        self,
        problem: str,
        *,
        hint: str | None = None,
        key_id: bytes | None = None,
        wk_id: bytes | None = None,
        plan_id: str | None = None,
    ) -> None:
        super().__init__(problem, hint=hint)
        self.key_id = key_id
        self.wk_id = wk_id
        self.plan_id = plan_id


class SubjectMissing(KeysError):
    """A record from which no data subject could be extracted, under the ``error`` policy."""

    default_hint = (
        "fix the producer so every record carries its subject, or set the topic's missing-subject "
        "policy to 'skip' or 'dead-letter'"
    )


class InvalidSubject(KeysError):
    """A subject id that strongroom cannot key (empty, or not valid text)."""

    default_hint = "subjects are non-empty UTF-8 strings of at most 4096 bytes"


class ErasureFailed(KeysError):
    """An erasure request could not be completed; the receipt says which steps are done."""

    default_hint = "run the same `strongroom erase` again: it resumes (markers and tombstones are idempotent)"


class UnknownReader(KeysError):
    """``keys readers --forget`` named a reader id that is not registered."""

    default_hint = "list the registered readers with `strongroom keys readers`"


class RewrapFailed(KeysError):
    """Some wrapping keys could not be rewrapped; the others were, and a rerun resumes."""

    default_hint = "fix the KMS problem named above and run `strongroom keys rewrap` again"


class RetireFailed(KeysError):
    """A retire record or a lease tombstone was not acknowledged by the keys topic."""

    default_hint = (
        "run `strongroom keys retire` again once Kafka accepts writes: a rerun is safe (it also retires the "
        "keys leased since)"
    )


class LostMarkingFailed(KeysError):
    """Lost markers (or their undo) could not be written to the keys topic, or did not read back in force."""

    default_hint = (
        "nothing is half-done for readers: rerun the same command once Kafka accepts writes (it is idempotent)"
    )


class KeysConfigError(ConfigError):
    """A keys-area configuration value that does not validate."""

    default_hint = "fix the configuration value named above"
