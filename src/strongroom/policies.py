"""The policies readers and writers share, one StrEnum each (a name means one thing everywhere).

Being ``str`` subclasses, each member equals its value: ``OnFailure("dead-letter") == "dead-letter"``, so
configuration files, CLI options and JSON carry the plain words.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TypeVar

_P = TypeVar("_P", bound=StrEnum)


def choose(name: str, value: str, policy: type[_P], error: Callable[..., Exception]) -> _P:
    """``value`` as a member of ``policy``; else ``error(message, hint=...)`` (the caller's error class, e.g.
    ``ConfigError``) naming the choices."""
    allowed = tuple(member.value for member in policy)
    if value not in allowed:
        raise error(f"{name}={value!r} is not one of {', '.join(allowed)}", hint=f"pass {name}={allowed[0]!r}")
    return policy(value)


class OnReject(StrEnum):
    """A record a writer cannot encrypt (no subject, not JSON in field mode, too large): a rule's
    ``on_reject`` in the pipelines and the client library."""

    FAIL = "fail"  # stop, naming the record
    DEAD_LETTER = "dead-letter"  # send it unchanged to the dead-letter topic, with the reason


class FrameOnReject(StrEnum):
    """The same, in the DataFrame API's ``encrypt_dataframe`` (a frame has no dead-letter topic)."""

    FAIL = "fail"  # computing the frame fails, naming the record
    DROP = "drop"  # left out


class FrameOnFailure(StrEnum):
    """A record ``decrypt_dataframe`` cannot decrypt (lost KEK, tampered or moved, unknown format, no key)."""

    FAIL = "fail"  # computing the frame fails, naming the record
    KEEP = "keep"  # returned with a null value, its status and reason
    SKIP = "skip"  # left out


class FrameOnErased(StrEnum):
    """A whole value of an erased subject in ``decrypt_dataframe``'s result."""

    KEEP = "keep"  # returned with a null value and status ``erased``
    DROP = "drop"  # left out


class OnFailure(StrEnum):
    """A record a reader cannot decrypt (lost KEK, tampered, unknown format, a downgrade)."""

    FAIL = "fail"  # stop, naming the record
    DEAD_LETTER = "dead-letter"  # send it unchanged to the dead-letter topic, with the reason
    SKIP = "skip"  # leave it out, counted


class OnErasedRecord(StrEnum):
    """A whole-value record of an erased subject, in a reader's output."""

    DROP = "drop"  # left out
    MARK = "mark"  # kept with a null value and a ``strongroom.erased`` header


class OnErasedField(StrEnum):
    """An encrypted JSON field of an erased subject, when a document is opened."""

    NULL = "null"  # the field becomes null; the rest of the document is kept
    RAISE = "raise"  # SubjectErased


class OnPending(StrEnum):
    """A record whose key has not arrived yet (client library)."""

    WAIT = "wait"  # hold the partition, retry, in order
    FAIL = "fail"


class ErasureFailOn(StrEnum):
    """When ``strongroom erasure status`` exits 4."""

    PENDING = "pending"  # any erasure not verified yet
    OVERDUE = "overdue"  # an erasure past the deadline the keys topic's configs promise


class Engine(StrEnum):
    """Where a pipeline's exactly-once Kafka writer runs (docs/pipelines.md, "Engines")."""

    PYTHON = "python"  # Arrow batches to a Python worker: the row transforms and confluent-kafka
    JVM = "jvm"  # in the executor JVM: the data plane's writer (java/, io.strongroom.dataplane.sink)


class MissingKek(StrEnum):
    """A rule's KEK alias that the KMS does not know (docs/pipelines.md, "A KEK per topic, in several KMSes")."""

    FAIL = "fail"  # stop before anything is sealed, naming topic, alias and KMS
    CREATE = "create"  # create the KEK in that KMS (where the KMS allows it), then go on
