"""The policies readers and writers share, one StrEnum each (a name means one thing everywhere).

Being ``str`` subclasses, each member equals its value: ``OnFailure("dead-letter") == "dead-letter"``, so
configuration files, CLI options and JSON carry the plain words.
"""

from __future__ import annotations

from enum import StrEnum


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
