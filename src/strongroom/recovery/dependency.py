"""What a record needs in order to be read: its key-reference prefixes, and the KEK each one depends on.

Recovery never decrypts a record to learn whether it is readable. It reads the record's *key
prefix* — the bytes of an envelope from its first byte through the end of its key reference (for
Kroxylicious: the wrapper's cipher id, EDEK length and EDEK) — and asks whether the key those bytes
name can still be unwrapped. Many records share one prefix (one DEK per KEK and time window), so the
expensive question is asked once per distinct prefix, not once per record.

The same prefix bytes are cut by the Spark jobs (in the JVM, with column expressions) and by the
Python record reader used by the boundary search; both hand them to the one Python parser of each
format (:meth:`RecordFormat.dependency`), so the two paths cannot disagree about what a key is.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from strongroom.kms.api import Edek


class RecordKind(enum.Enum):
    """What a record is, before any key is looked at."""

    PLAIN = "plain"  # no encryption marker: readable as it is
    TOMBSTONE = "tombstone"  # null value: never encrypted, readable
    ENCRYPTED = "encrypted"  # carries one or more key prefixes
    MALFORMED = "malformed"  # claims to be encrypted but its bytes do not parse


@dataclass(frozen=True, slots=True)
class RecordKeys:
    """A record's kind and, when encrypted, the key prefixes of its envelopes (JSON mode: several)."""

    kind: RecordKind
    prefixes: tuple[bytes, ...] = ()
    problem: str | None = None

    @classmethod
    def plain(cls, value: bytes | None) -> RecordKeys:
        return cls(RecordKind.TOMBSTONE if value is None else RecordKind.PLAIN)

    @classmethod
    def malformed(cls, problem: str) -> RecordKeys:
        return cls(RecordKind.MALFORMED, problem=problem)


@dataclass(frozen=True, slots=True)
class KeyDependency:
    """The key a prefix depends on.

    ``kek`` is the provider-qualified KEK reference shown to operators (``vault:orders-kek``),
    ``kek_id`` the id the KMS knows it by, ``version`` the KEK version when the EDEK says which
    (Vault ``v3``, local ``v2``; None for AWS, whose blobs do not reveal it). ``edek`` is what to
    unwrap to prove the key is available; it is None for per-subject keys, which are resolved
    through the keys topic chain (``subject_key_id``).
    """

    kek: str
    kek_id: str
    provider: str
    version: str | None
    edek: Edek | None
    subject_key_id: bytes | None = None

    @property
    def label(self) -> str:
        """KEK and version, as inventories group them: ``vault:orders-kek@v3``."""
        return f"{self.kek}@{self.version}" if self.version else self.kek

    def __repr__(self) -> str:  # never show EDEK bytes in logs
        return f"KeyDependency(kek={self.kek!r}, version={self.version!r})"


class KeyStatus(enum.Enum):
    """Whether a key prefix can be opened now."""

    READABLE = "readable"
    LOST = "lost"  # the KEK is missing, pending deletion, disabled — or assumed lost (--kek)
    CORRUPT = "corrupt"  # the prefix or EDEK does not parse or the KMS rejects it as invalid
    ERASED = "erased"  # a subject key that is gone on purpose (crypto-shredding): not a KEK loss
    DECLARED_LOST = "declared-lost"  # a subject key under a wrapping key marked lost (recover mark-lost): handled


@dataclass(frozen=True, slots=True)
class KeyVerdict:
    """The answer for one key prefix: its status, the KEK it depends on (if it parsed), and why."""

    status: KeyStatus
    dependency: KeyDependency | None
    reason: str = ""

    @property
    def readable(self) -> bool:
        """Not lost or corrupt. An erased subject key counts: its records are unreadable on purpose,
        consumers skip them under their erasure policy, and no KEK repair concerns them. So does a key
        declared lost: readers skip its records deliberately, the remedy was already applied."""
        return self.status in (KeyStatus.READABLE, KeyStatus.ERASED, KeyStatus.DECLARED_LOST)

    @property
    def kek(self) -> str:
        return self.dependency.kek if self.dependency is not None else "(unparsable)"
