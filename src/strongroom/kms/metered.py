"""MeteredKms: count every KMS call by operation and outcome, and time it.

Put it *under* the cache (``CachingKms(MeteredKms(provider))``) to count real round trips to the
KMS — the figure behind "KMS calls per 1M records" — or above it to count what callers ask for.
``snapshot()`` returns plain dicts, ready for JSON output or a metrics exporter.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from strongroom.errors import KmsError
from strongroom.kms.api import DekPair, Edek, KekState, Kms
from strongroom.kms.wrapper import KmsWrapper

T = TypeVar("T")


class MeteredKms(KmsWrapper):
    """Counters per (operation, outcome) and latency sum/count/max per operation. Thread-safe."""

    def __init__(self, inner: Kms, *, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(inner)
        self._clock = clock
        self._lock = threading.Lock()
        self._outcomes: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._latency: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        self._items: defaultdict[str, int] = defaultdict(int)

    def _measure(self, operation: str, call: Callable[[], T], items: int = 1) -> T:
        started = self._clock()
        outcome = "ok"
        try:
            return call()
        except KmsError as exc:
            outcome = type(exc).__name__
            raise
        except Exception:
            outcome = "unexpected"
            raise
        finally:
            elapsed = self._clock() - started
            with self._lock:
                self._outcomes[operation][outcome] += 1
                self._items[operation] += items
                latency = self._latency[operation]
                latency[0] += elapsed
                latency[1] += 1
                latency[2] = max(latency[2], elapsed)

    def resolve_alias(self, alias: str) -> str:
        return self._measure("resolve_alias", lambda: self.inner.resolve_alias(alias))

    def generate_dek(self, kek_id: str) -> DekPair:
        return self._measure("generate_dek", lambda: self.inner.generate_dek(kek_id))

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        return self._measure("wrap", lambda: self.inner.wrap(kek_id, plaintext, context))

    def unwrap(self, edek: Edek) -> bytes:
        return self._measure("unwrap", lambda: self.inner.unwrap(edek))

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        return self._measure("unwrap_many", lambda: self.inner.unwrap_many(edeks), items=len(edeks))

    def describe_kek(self, kek_id: str) -> KekState:
        return self._measure("describe_kek", lambda: self.inner.describe_kek(kek_id))

    @property
    def calls(self) -> int:
        """Total calls that reached the wrapped KMS."""
        with self._lock:
            return sum(sum(outcomes.values()) for outcomes in self._outcomes.values())

    def snapshot(self) -> dict[str, Any]:
        """``{"calls": n, "operations": {op: {"outcomes": {...}, "items": n, "latency": {...}}}}``."""
        operations: dict[str, Any] = {}
        calls = 0
        with self._lock:
            for operation, outcomes in self._outcomes.items():
                total, count, slowest = self._latency[operation]
                calls += sum(outcomes.values())
                operations[operation] = {
                    "outcomes": dict(outcomes),
                    "items": self._items[operation],
                    "latency": {"count": int(count), "sum_seconds": total, "max_seconds": slowest},
                }
        return {"calls": calls, "operations": operations}

    def reset(self) -> None:
        with self._lock:
            self._outcomes.clear()
            self._latency.clear()
            self._items.clear()
