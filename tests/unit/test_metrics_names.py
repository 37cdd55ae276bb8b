"""The Prometheus metrics: docs/metrics.md lists exactly the registered names; the collectors add up,
keep a collected client's counts, survive a failing sampler; the pipeline counters observe phases."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from strongroom.audit.metrics import WatchMetrics
from strongroom.errors import KmsError
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms, metered_in
from strongroom.kms.registry import kms_from_config
from strongroom.metrics import RecordSample, metric_lines, metrics_for, registered_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def documented_names() -> set[str]:
    return set(re.findall(r"^\| `(strongroom_[a-z_]+)` \|", DOC.read_text(), flags=re.MULTILINE))


def scraped(registry: CollectorRegistry) -> dict[str, float]:
    """``{'name{labels}': value}`` of a scrape."""
    out: dict[str, float] = {}
    for line in metric_lines(registry):
        if line and not line.startswith("#"):
            name, _, number = line.rpartition(" ")
            out[name] = float(number)
    return out


def test_the_documented_names_are_exactly_the_registered_ones() -> None:
    registered = registered_names(metrics_for(CollectorRegistry()).registry) | registered_names(WatchMetrics().registry)
    assert documented_names() == registered


def test_metrics_for_gives_one_set_of_families_per_registry() -> None:
    registry = CollectorRegistry()
    assert metrics_for(registry) is metrics_for(registry)
    assert metrics_for(CollectorRegistry()) is not metrics_for(registry)


class Client:
    """Stands for a producer: plain counters, a bound-method sampler."""

    def __init__(self, sealed: int, dead: int = 0) -> None:
        self.sealed = sealed
        self.dead = dead

    def record_sample(self) -> RecordSample:
        return RecordSample({"sealed": self.sealed, "rejected": self.dead}, dead_lettered=self.dead)


def test_clients_of_one_component_add_up_and_a_collected_clients_counts_stay() -> None:
    registry = CollectorRegistry()
    metrics = metrics_for(registry)
    first, second = Client(3, dead=1), Client(4)
    metrics.watch_records("producer", first.record_sample)
    metrics.watch_records("producer", second.record_sample)
    sealed = 'strongroom_records_total{component="producer",outcome="sealed"}'
    assert scraped(registry)[sealed] == 7
    assert scraped(registry)['strongroom_records_dead_lettered_total{component="producer"}'] == 1
    second.sealed = 10
    del first
    gc.collect()
    assert scraped(registry)[sealed] == 13  # the collected client's 3 stay: a counter never goes back


def test_a_failing_sampler_shows_its_last_figures_and_the_scrape_still_works() -> None:
    registry = CollectorRegistry()
    calls = {"n": 0}

    def sample() -> RecordSample:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("broker gone")
        return RecordSample({"opened": 5}, pending=2, oldest_pending_age_s=9.5)

    metrics_for(registry).watch_records("consumer", sample)
    for _ in range(2):
        figures = scraped(registry)
        assert figures['strongroom_records_total{component="consumer",outcome="opened"}'] == 5
        assert figures['strongroom_records_pending{component="consumer"}'] == 2
        assert figures['strongroom_records_pending_oldest_age_seconds{component="consumer"}'] == 9.5


def test_kms_calls_errors_and_latency_per_provider_and_operation(tmp_path: Path) -> None:
    kms = LocalKms.from_config({"path": str(tmp_path / "ring.json"), "create": True})
    LocalKeyringAdmin(kms.keyring).create_kek("orders")
    metered = MeteredKms(kms)
    registry = CollectorRegistry()
    metrics_for(registry).watch_kms(metered.sample)
    kek = metered.resolve_alias("orders")
    metered.generate_dek(kek)
    metered.generate_dek(kek)
    with pytest.raises(KmsError) as refused:
        metered.generate_dek("no-such-kek")
    figures = scraped(registry)
    assert figures['strongroom_kms_calls_total{operation="generate_dek",provider="local"}'] == 3
    assert figures['strongroom_kms_calls_total{operation="resolve_alias",provider="local"}'] == 1
    error = type(refused.value).__name__
    assert figures[f'strongroom_kms_errors_total{{error="{error}",operation="generate_dek",provider="local"}}'] == 1
    assert figures['strongroom_kms_call_seconds_count{operation="generate_dek",provider="local"}'] == 3
    assert figures['strongroom_kms_call_seconds_sum{operation="generate_dek",provider="local"}'] > 0


def test_the_metered_layer_is_found_under_the_cache_and_retries(tmp_path: Path) -> None:
    LocalKms.from_config({"path": str(tmp_path / "ring.json"), "create": True})
    stacked = kms_from_config({"provider": "local", "path": str(tmp_path / "ring.json"), "metrics": True})
    assert isinstance(metered_in(stacked), MeteredKms)
    assert metered_in(kms_from_config({"provider": "local", "path": str(tmp_path / "ring.json")})) is None


def test_pipeline_counters_observe_phases_batches_transactions_and_gaps() -> None:
    from strongroom.spark.jobs.common import Counters
    from strongroom.spark.kafka_sink import PartitionSummary

    registry = CollectorRegistry()
    counters = Counters(instruments=metrics_for(registry).pipeline, pipeline="encrypt")
    with counters.phase("keys"):
        pass
    summary = PartitionSummary("orders", 0, 0, 0, 5, 5, 0, {"ok": 5}, None)
    counters.add_batch([summary, summary])
    counters.add_input_gaps({("orders", 0): 7, ("orders", 1): 3})
    counters.add_aborted(2)
    figures = scraped(registry)
    assert figures['strongroom_pipeline_phase_seconds_count{phase="keys",pipeline="encrypt"}'] == 1
    assert figures['strongroom_pipeline_batches_total{pipeline="encrypt"}'] == 1
    assert figures['strongroom_pipeline_transactions_committed_total{pipeline="encrypt"}'] == 2
    assert figures['strongroom_pipeline_transactions_aborted_total{pipeline="encrypt"}'] == 2
    assert figures['strongroom_pipeline_input_gaps_total{pipeline="encrypt"}'] == 1
    assert figures['strongroom_pipeline_input_gap_offsets_total{pipeline="encrypt"}'] == 10
    assert counters.snapshot().input_gaps.offsets == 10  # the result reports the same gaps as before
