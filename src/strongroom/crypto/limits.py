"""DEK usage limits: how many encryptions, and for how long, one DEK may be used.

With random 96-bit nonces the chance that two of *q* encryptions under one key share a nonce is
at most q² / 2⁹⁷. The default of 2²⁸ encryptions per DEK gives ≤ 2⁵⁶ / 2⁹⁷ = 2⁻⁴¹ (about 4.5e-13),
well inside NIST SP 800-38D's 2⁻³² requirement (which allows 2³² encryptions). A nonce collision
would leak the XOR of two plaintexts and the GHASH key for that DEK, so the limit errs far on the
safe side. The age limit bounds how much data one stolen DEK exposes.

The counter lives in the process that encrypts. N processes sharing one DEK each count their own
encryptions, so the global bound is N × ``max_encryptions``; owners that share a DEK widely should
lower the limit accordingly (the default leaves room for 16 writers before reaching 2³²).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from strongroom.crypto.errors import DekExhausted

DEFAULT_MAX_ENCRYPTIONS = 2**28
#: 2³² random-nonce encryptions is the NIST ceiling for one key; no policy may exceed it.
HARD_MAX_ENCRYPTIONS = 2**32


@dataclass(frozen=True, slots=True)
class DekUsagePolicy:
    """Limits for one DEK. ``max_age_seconds=None`` means no age limit."""

    max_encryptions: int = DEFAULT_MAX_ENCRYPTIONS
    max_age_seconds: float | None = 24 * 3600.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_encryptions <= HARD_MAX_ENCRYPTIONS:
            raise ValueError(
                f"max_encryptions={self.max_encryptions} is outside 1..2**32 "
                "(random 96-bit nonces allow at most 2**32 encryptions per key)"
            )
        if self.max_age_seconds is not None and self.max_age_seconds <= 0:
            raise ValueError(f"max_age_seconds={self.max_age_seconds} must be positive or None")


class DekUsage:
    """The running count of one DEK's encryptions, checked before each one.

    ``charge()`` raises :class:`DekExhausted` instead of letting an encryption exceed the policy;
    ``exhausted`` lets an owner rotate proactively without catching the error.
    """

    __slots__ = ("_clock", "_count", "_created", "_lock", "label", "policy")

    def __init__(
        self,
        policy: DekUsagePolicy | None = None,
        *,
        label: str = "DEK",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or DekUsagePolicy()
        self.label = label
        self._clock = clock
        self._created = clock()
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return self._count

    @property
    def age_seconds(self) -> float:
        return self._clock() - self._created

    @property
    def exhausted(self) -> bool:
        """True once the next encryption would break the policy."""
        if self._count >= self.policy.max_encryptions:
            return True
        max_age = self.policy.max_age_seconds
        return max_age is not None and self.age_seconds >= max_age

    def charge(self, encryptions: int = 1) -> None:
        """Account for ``encryptions`` more uses, or raise :class:`DekExhausted` without counting."""
        with self._lock:
            if self._count + encryptions > self.policy.max_encryptions:
                raise DekExhausted(f"{self.label} reached its limit of {self.policy.max_encryptions} encryptions")
            max_age = self.policy.max_age_seconds
            if max_age is not None and self._clock() - self._created >= max_age:
                raise DekExhausted(f"{self.label} is older than its limit of {max_age:g} seconds")
            self._count += encryptions

    def __repr__(self) -> str:
        return f"DekUsage(label={self.label!r}, count={self._count}, policy={self.policy!r})"
