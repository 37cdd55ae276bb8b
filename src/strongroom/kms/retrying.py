"""RetryingKms: retry transient KMS failures with exponential backoff and full jitter.

Only :class:`~strongroom.kms.errors.KmsUnavailable` is retried. Everything else — a lost or
disabled KEK, denied access, a bad EDEK — is an answer, not an outage, and retrying it would only
delay the operator's message. Waits follow "full jitter" (a uniformly random wait between 0 and
``min(max_delay, base_delay × 2^attempt)``), which spreads out a fleet of clients that failed
together. Both a maximum number of attempts and an overall deadline bound the total time.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from strongroom.errors import KmsError
from strongroom.kms.api import DekPair, Edek, KekState, Kms
from strongroom.kms.errors import KmsUnavailable
from strongroom.kms.wrapper import KmsWrapper

T = TypeVar("T")


class RetryingKms(KmsWrapper):
    """Retries ``KmsUnavailable`` up to ``max_attempts`` times within ``deadline_seconds``."""

    def __init__(
        self,
        inner: Kms,
        *,
        max_attempts: int = 5,
        base_delay_seconds: float = 0.1,
        max_delay_seconds: float = 5.0,
        deadline_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(inner)
        if max_attempts < 1 or base_delay_seconds < 0 or max_delay_seconds < 0 or deadline_seconds <= 0:
            raise ValueError("retry settings must be positive (max_attempts >= 1)")
        self.max_attempts = max_attempts
        self.base_delay = base_delay_seconds
        self.max_delay = max_delay_seconds
        self.deadline = deadline_seconds
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()

    def _retry(self, operation: str, call: Callable[[], T]) -> T:
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except KmsUnavailable as exc:
                delay = self._next_delay(attempt, started)
                if delay is None:
                    elapsed = self._clock() - started
                    raise KmsUnavailable(
                        f"{operation}: KMS still unavailable after {attempt} attempt(s) "
                        f"in {elapsed:.1f}s; last error: {exc.problem}",
                        hint=exc.hint,
                    ) from exc
                self._sleep(delay)

    def _next_delay(self, attempt: int, started: float) -> float | None:
        """The wait before the next attempt, or None when attempts or time are used up."""
        if attempt >= self.max_attempts:
            return None
        delay = self._rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
        if self._clock() + delay - started >= self.deadline:
            return None
        return delay

    def resolve_alias(self, alias: str) -> str:
        return self._retry("resolve_alias", lambda: self.inner.resolve_alias(alias))

    def generate_dek(self, kek_id: str) -> DekPair:
        return self._retry("generate_dek", lambda: self.inner.generate_dek(kek_id))

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        return self._retry("wrap", lambda: self.inner.wrap(kek_id, plaintext, context))

    def unwrap(self, edek: Edek) -> bytes:
        return self._retry("unwrap", lambda: self.inner.unwrap(edek))

    def describe_kek(self, kek_id: str) -> KekState:
        return self._retry("describe_kek", lambda: self.inner.describe_kek(kek_id))

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        """Retries the call, and then the items that individually came back unavailable."""
        results = self._retry("unwrap_many", lambda: self.inner.unwrap_many(edeks))
        started = self._clock()
        attempt = 1
        while True:
            pending = [i for i, r in enumerate(results) if isinstance(r, KmsUnavailable)]
            if not pending:
                return results
            delay = self._next_delay(attempt, started)
            if delay is None:
                return results
            self._sleep(delay)
            attempt += 1
            batch = [edeks[i] for i in pending]
            retried = self._retry("unwrap_many", functools.partial(self.inner.unwrap_many, batch))
            for index, outcome in zip(pending, retried, strict=True):
                results[index] = outcome
