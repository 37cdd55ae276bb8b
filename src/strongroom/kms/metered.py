"""MeteredKms: count every KMS call by operation and outcome, and time it.

Put it *under* the cache (``CachingKms(MeteredKms(provider))``) to count real round trips to the
KMS — the figure behind "KMS calls per 1M records" — or above it to count what callers ask for.
``snapshot()`` returns plain dicts, ready for JSON output or a metrics exporter.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from strongroom.errors import KmsError
from strongroom.kms.api import Kms
from strongroom.kms.wrapper import KmsWrapper
from strongroom.metrics import KmsOperationSample, KmsSample, Metrics

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

    def _around(self, operation: str, call: Callable[[], T], items: int = 1) -> T:
        """Count the call's outcome and time it."""
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

    def sample(self) -> KmsSample:
        """The figures for Prometheus (:mod:`strongroom.metrics`), labelled with the provider's name."""
        with self._lock:
            operations = {
                operation: KmsOperationSample(
                    outcomes=dict(outcomes),
                    seconds_sum=self._latency[operation][0],
                    seconds_count=int(self._latency[operation][1]),
                    seconds_max=self._latency[operation][2],
                )
                for operation, outcomes in self._outcomes.items()
            }
        return KmsSample(provider=self.name, operations=operations)

    def reset(self) -> None:
        with self._lock:
            self._outcomes.clear()
            self._latency.clear()
            self._items.clear()


def metered_in(kms: Kms | None) -> MeteredKms | None:
    """The :class:`MeteredKms` in a stack of wrappers (``kms_from_config(..., metrics=True)``), if any."""
    layer: Kms | None = kms
    while layer is not None:
        if isinstance(layer, MeteredKms):
            return layer
        layer = layer.inner if isinstance(layer, KmsWrapper) else None
    return None


def watch_metered(metrics: Metrics, kmses: Iterable[Kms | None]) -> None:
    """Export the calls of every metered KMS among ``kmses`` (each once; a KMS per topic may repeat)."""
    seen: set[int] = set()
    for kms in kmses:
        metered = metered_in(kms)
        if metered is not None and id(metered) not in seen:
            seen.add(id(metered))
            metrics.watch_kms(metered.sample)
