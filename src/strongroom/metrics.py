"""Prometheus metrics of every long-running part: every metric strongroom exports is defined here.

One :class:`Metrics` per ``prometheus_client`` registry (:func:`metrics_for`) holds every family, so
the pipelines, the client library, key tables and KMS wrappers of one process share one ``/metrics``
page without clashing names. The parts themselves keep their own plain counters (``counters`` dicts,
``stats()``); the sites only register a *sampler* (a function returning a small typed sample) which the
collectors read when Prometheus scrapes. Only what must be observed as it happens (phase latencies,
transactions) is counted at the site, through :class:`PipelineInstruments`.

A sampler is held weakly when it is a bound method: a client that is garbage collected stops being
sampled, and its last counts stay in the totals so counters never go backwards.

docs/metrics.md lists every name (``tests/unit/test_metrics_names.py`` checks the list against
:func:`registered_names`). This module sits at the bottom layer: it imports nothing of strongroom.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

#: Histogram buckets for pipeline phases (seconds per micro-batch phase: milliseconds to minutes).
PHASE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


# ---------------------------------------------------------------------------------------------- samples
@dataclass(frozen=True)
class RecordSample:
    """What a pipeline or client has done with records so far.

    ``outcomes`` are exclusive (each record counted once): ``sealed``, ``opened``, ``rejected``,
    ``failed``, ``erased``, ``passthrough``, ``dropped``, ``skipped``, ... ``dead_lettered`` counts the
    records among them that went to the dead-letter topic.
    """

    outcomes: Mapping[str, int]
    dead_lettered: int = 0
    #: Records waiting for their subject's key now, and how long the oldest has waited.
    pending: int = 0
    oldest_pending_age_s: float = 0.0


@dataclass(frozen=True)
class KeyTableSample:
    """A key table's figures: keys cached, lookups (cache hits and misses), erasures applied, keys
    created (by the key manager over it, if any), and how far it lags behind the keys topic."""

    cached: int
    lookups: int
    cache_hits: int
    erasures_applied: int
    created: int = 0
    #: Records of the keys topic not applied yet (None: unknown, the topic's end could not be read).
    lag_records: int | None = None


@dataclass(frozen=True)
class KmsOperationSample:
    """One KMS operation's calls by outcome (``ok`` or the error's class name) and latency."""

    outcomes: Mapping[str, int]
    seconds_sum: float
    seconds_count: int
    seconds_max: float


@dataclass(frozen=True)
class KmsSample:
    provider: str
    operations: Mapping[str, KmsOperationSample]


# ---------------------------------------------------------------------------------------------- sources
@dataclass
class _Source:
    """One registered sampler and its labels; a dead weak sampler is replaced by its last sample."""

    labels: tuple[str, ...]
    sampler: Callable[[], Any]
    last: Any = None

    def sample(self) -> tuple[Any, bool]:
        """``(sample, alive)``; a sampler that fails gives its last sample (a scrape never fails)."""
        call = self.sampler() if isinstance(self.sampler, weakref.WeakMethod) else self.sampler
        if call is None:
            return self.last, False
        try:
            self.last = call()
        except Exception as exc:  # noqa: BLE001 - a scrape shows the last known figures rather than failing
            log.debug("a metrics sampler failed (%s); the last figures are shown", type(exc).__name__)
        return self.last, True


def _hold(sampler: Callable[[], Any]) -> Callable[[], Any]:
    """Bound methods are held weakly (the client may be garbage collected), anything else strongly."""
    if hasattr(sampler, "__self__") and hasattr(sampler, "__func__"):
        return weakref.WeakMethod(sampler)
    return sampler


class _SampledCollector:
    """A custom collector over registered samplers, with retired sources' counters kept in the totals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: list[_Source] = []
        self._retired: list[_Source] = []

    def add(self, labels: tuple[str, ...], sampler: Callable[[], Any]) -> None:
        with self._lock:
            self._sources.append(_Source(labels, _hold(sampler)))

    def _samples(self) -> tuple[list[tuple[tuple[str, ...], Any]], list[tuple[tuple[str, ...], Any]]]:
        """Live samples and retired ones (counters only), each with its labels."""
        with self._lock:
            live: list[tuple[tuple[str, ...], Any]] = []
            for source in list(self._sources):
                value, alive = source.sample()
                if not alive:
                    self._sources.remove(source)
                    self._retired.append(source)
                elif value is not None:
                    live.append((source.labels, value))
            retired = [(s.labels, s.last) for s in self._retired if s.last is not None]
        return live, retired

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        live, retired = self._samples()
        families = self._families()
        self._fill(families, live, retired)
        return families

    def _families(self) -> list[Metric]:
        raise NotImplementedError

    def _fill(self, families: list[Metric], live: list[tuple[tuple[str, ...], Any]],
              retired: list[tuple[tuple[str, ...], Any]]) -> None:  # fmt: skip
        raise NotImplementedError


def _summed(entries: Iterable[tuple[tuple[str, ...], int]]) -> dict[tuple[str, ...], int]:
    """Counts with the same labels added up (two clients of one component in one process)."""
    totals: dict[tuple[str, ...], int] = {}
    for labels, n in entries:
        totals[labels] = totals.get(labels, 0) + n
    return totals


class RecordsCollector(_SampledCollector):
    """Records per component (``encrypt``, ``decrypt``, ``producer``, ``consumer``) and outcome."""

    def _families(self) -> list[Metric]:
        return [
            CounterMetricFamily(
                "strongroom_records", "Records handled, by component and outcome", labels=["component", "outcome"]
            ),
            CounterMetricFamily(
                "strongroom_records_dead_lettered", "Records sent to the dead-letter topic", labels=["component"]
            ),
            GaugeMetricFamily(
                "strongroom_records_pending", "Records waiting for their subject's key now", labels=["component"]
            ),
            GaugeMetricFamily(
                "strongroom_records_pending_oldest_age_seconds",
                "How long the oldest record waiting for its key has waited",
                labels=["component"],
            ),
        ]

    def _fill(self, families: list[Metric], live: list[tuple[tuple[str, ...], Any]],
              retired: list[tuple[tuple[str, ...], Any]]) -> None:  # fmt: skip
        records, dead, pending, oldest = families
        everything = live + retired
        outcomes = _summed(((*labels, outcome), n) for labels, s in everything for outcome, n in s.outcomes.items())
        for labels, n in sorted(outcomes.items()):
            records.add_metric(list(labels), n)  # type: ignore[attr-defined]
        for labels, n in sorted(_summed((labels, s.dead_lettered) for labels, s in everything).items()):
            dead.add_metric(list(labels), n)  # type: ignore[attr-defined]
        held = _summed((labels, s.pending) for labels, s in live)
        ages: dict[tuple[str, ...], float] = {}
        for labels, s in live:
            ages[labels] = max(ages.get(labels, 0.0), s.oldest_pending_age_s)
        for labels, n in sorted(held.items()):
            pending.add_metric(list(labels), n)  # type: ignore[attr-defined]
            oldest.add_metric(list(labels), ages[labels])  # type: ignore[attr-defined]


class KeyTablesCollector(_SampledCollector):
    """Key tables per keys topic."""

    def _families(self) -> list[Metric]:
        labels = ["keys_topic"]
        return [
            GaugeMetricFamily("strongroom_keys_cached", "Subject keys in the key table's memory cache", labels=labels),
            CounterMetricFamily("strongroom_keys_lookups", "Subject key lookups", labels=labels),
            CounterMetricFamily(
                "strongroom_keys_cache_hits", "Subject key lookups answered from memory", labels=labels
            ),
            CounterMetricFamily("strongroom_keys_created", "Subject keys created", labels=labels),
            CounterMetricFamily(
                "strongroom_keys_erasures_applied", "Erasure markers applied from the keys topic", labels=labels
            ),
            GaugeMetricFamily(
                "strongroom_keys_lag_records", "Records of the keys topic not applied yet", labels=labels
            ),
        ]

    def _fill(self, families: list[Metric], live: list[tuple[tuple[str, ...], Any]],
              retired: list[tuple[tuple[str, ...], Any]]) -> None:  # fmt: skip
        cached, lookups, hits, created, erasures, lag = families
        everything = live + retired
        for family, attribute in ((lookups, "lookups"), (hits, "cache_hits"), (created, "created"),
                                  (erasures, "erasures_applied")):  # fmt: skip
            for labels, n in sorted(_summed((labels, getattr(s, attribute)) for labels, s in everything).items()):
                family.add_metric(list(labels), n)  # type: ignore[attr-defined]
        for labels, n in sorted(_summed((labels, s.cached) for labels, s in live).items()):
            cached.add_metric(list(labels), n)  # type: ignore[attr-defined]
        lags: dict[tuple[str, ...], int] = {}
        for labels, s in live:
            if s.lag_records is not None:
                lags[labels] = max(lags.get(labels, 0), s.lag_records)
        for labels, n in sorted(lags.items()):
            lag.add_metric(list(labels), n)  # type: ignore[attr-defined]


class KmsCollector(_SampledCollector):
    """KMS calls per provider and operation (from :class:`~strongroom.kms.metered.MeteredKms`)."""

    def _families(self) -> list[Metric]:
        return [
            CounterMetricFamily("strongroom_kms_calls", "Calls that reached the KMS", labels=["provider", "operation"]),
            CounterMetricFamily(
                "strongroom_kms_errors", "KMS calls that failed, by error", labels=["provider", "operation", "error"]
            ),
            SummaryMetricFamily(
                "strongroom_kms_call_seconds", "Latency of KMS calls", labels=["provider", "operation"]
            ),
            GaugeMetricFamily(
                "strongroom_kms_call_max_seconds", "Slowest KMS call so far", labels=["provider", "operation"]
            ),
        ]

    def _fill(self, families: list[Metric], live: list[tuple[tuple[str, ...], Any]],
              retired: list[tuple[tuple[str, ...], Any]]) -> None:  # fmt: skip
        calls, errors, seconds, slowest = families
        call_totals: dict[tuple[str, ...], int] = {}
        error_totals: dict[tuple[str, ...], int] = {}
        sums: dict[tuple[str, ...], tuple[int, float, float]] = {}
        for _, sample in live + retired:
            for operation, op in sample.operations.items():
                key = (sample.provider, operation)
                call_totals[key] = call_totals.get(key, 0) + sum(op.outcomes.values())
                for outcome, n in op.outcomes.items():
                    if outcome != "ok":
                        error_key = (*key, outcome)
                        error_totals[error_key] = error_totals.get(error_key, 0) + n
                count, total, top = sums.get(key, (0, 0.0, 0.0))
                sums[key] = (count + op.seconds_count, total + op.seconds_sum, max(top, op.seconds_max))
        for labels, n in sorted(call_totals.items()):
            calls.add_metric(list(labels), n)  # type: ignore[attr-defined]
        for labels, n in sorted(error_totals.items()):
            errors.add_metric(list(labels), n)  # type: ignore[attr-defined]
        for labels, (count, total, top) in sorted(sums.items()):
            seconds.add_metric(list(labels), count_value=count, sum_value=total)  # type: ignore[attr-defined]
            slowest.add_metric(list(labels), top)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------- pipelines
@dataclass
class PipelineInstruments:
    """What the Spark pipelines count as it happens (one set per registry, labelled by pipeline)."""

    registry: CollectorRegistry
    phase_seconds: Histogram = field(init=False)
    batches: Counter = field(init=False)
    transactions_committed: Counter = field(init=False)
    transactions_aborted: Counter = field(init=False)
    input_gaps: Counter = field(init=False)
    input_gap_offsets: Counter = field(init=False)

    def __post_init__(self) -> None:
        r = self.registry
        self.phase_seconds = Histogram(
            "strongroom_pipeline_phase_seconds",
            "Seconds per micro-batch phase (keys: the key service answering the tasks; write: the exactly-once write)",
            ["pipeline", "phase"],
            buckets=PHASE_BUCKETS,
            registry=r,
        )
        self.batches = Counter("strongroom_pipeline_batches", "Micro-batches written", ["pipeline"], registry=r)
        self.transactions_committed = Counter(
            "strongroom_pipeline_transactions_committed",
            "Kafka transactions committed (one per source partition per batch)",
            ["pipeline"],
            registry=r,
        )
        self.transactions_aborted = Counter(
            "strongroom_pipeline_transactions_aborted",
            "Open Kafka transactions of stopped tasks that the pipeline aborted",
            ["pipeline"],
            registry=r,
        )
        self.input_gaps = Counter(
            "strongroom_pipeline_input_gaps",
            "Batches that found input aged out (retention) before the pipeline read it",
            ["pipeline"],
            registry=r,
        )
        self.input_gap_offsets = Counter(
            "strongroom_pipeline_input_gap_offsets",
            "Input offsets that aged out before the pipeline read them",
            ["pipeline"],
            registry=r,
        )

    def start(self, pipeline: str) -> None:
        """Export the pipeline's counters at 0 from the start, so a scrape shows "no gap, no abort yet" (and
        rate() works) rather than no series at all until the first event."""
        for counter in (
            self.batches,
            self.transactions_committed,
            self.transactions_aborted,
            self.input_gaps,
            self.input_gap_offsets,
        ):
            counter.labels(pipeline)


# ---------------------------------------------------------------------------------------------- one per registry
class Metrics:
    """Every strongroom metric family of one registry. Get it with :func:`metrics_for`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.records = RecordsCollector()
        self.key_tables = KeyTablesCollector()
        self.kms = KmsCollector()
        for collector in (self.records, self.key_tables, self.kms):
            registry.register(collector)
        self.pipeline = PipelineInstruments(registry)

    def watch_records(self, component: str, sampler: Callable[[], RecordSample]) -> None:
        self.records.add((component,), sampler)

    def watch_key_table(self, keys_topic: str, sampler: Callable[[], KeyTableSample]) -> None:
        self.key_tables.add((keys_topic,), sampler)

    def watch_kms(self, sampler: Callable[[], KmsSample | None]) -> None:
        self.kms.add((), sampler)


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, Metrics] = weakref.WeakKeyDictionary()
_by_registry_lock = threading.Lock()


def metrics_for(registry: CollectorRegistry) -> Metrics:
    """The one :class:`Metrics` of ``registry`` (made on first use)."""
    with _by_registry_lock:
        found = _by_registry.get(registry)
        if found is None:
            found = _by_registry[registry] = Metrics(registry)
        return found


def registered_names(registry: CollectorRegistry) -> set[str]:
    """The metric names a scrape of ``registry`` shows (counters with their ``_total``), without samples."""
    names: set[str] = set()
    for family in registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


def metric_lines(registry: CollectorRegistry) -> Iterator[str]:
    """``name{labels} value`` lines of a scrape (for tests and text output)."""
    from prometheus_client import generate_latest

    yield from generate_latest(registry).decode().splitlines()


class MetricsServer:
    """The ``/metrics`` HTTP endpoint of one registry (``--metrics-port``)."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> None:
        server, thread = start_http_server(port, addr=host, registry=registry)
        self._server = server
        self._thread = thread
        self.port = int(server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
