"""The pipelines' Prometheus metrics (what `--metrics-port` serves), scraped over HTTP after real runs."""

from __future__ import annotations

import urllib.request
from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from strongroom.metrics import MetricsServer
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob


def scrape(port: int) -> dict[str, float]:
    """``{'name{a=x,b=y}': value}`` of one HTTP scrape (labels sorted)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        sample.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())) + "}": sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_encrypt_and_decrypt_metrics_over_http(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    dlq = env.new_topic(partitions=1)
    env.produce_events(topic, 30, customers=3)
    env.produce_raw(topic, [(None, b"no key, no subject")])
    kms = {**env.kms_config, "metrics": True}  # what --metrics-port does to the KMS config
    registry = CollectorRegistry()
    server = MetricsServer(registry, 0)
    try:
        rules = {"rules": [{"topic": topic, "on_reject": "dead-letter"}]}
        job = EncryptJob(spark, replace(env.settings(rules, "enc", dead_letter_topic=dlq), kms=kms))
        job.attach_metrics(registry)
        try:
            result = job.run()
        finally:
            job.close()
        assert result.records == {"ok": 30, "rejected": 1}
        got = scrape(server.port)
        assert got["strongroom_records_total{component=encrypt,outcome=sealed}"] == 30
        assert got["strongroom_records_total{component=encrypt,outcome=rejected}"] == 1
        assert got["strongroom_records_dead_lettered_total{component=encrypt}"] == 1
        batches = got["strongroom_pipeline_batches_total{pipeline=encrypt}"]
        assert batches == result.batches
        assert got["strongroom_pipeline_phase_seconds_count{phase=write,pipeline=encrypt}"] == batches
        assert got["strongroom_pipeline_phase_seconds_count{phase=keys,pipeline=encrypt}"] >= 1
        # one transaction per source partition that had records, in the one batch
        with_records = {m.partition() for m in env.read(topic)}
        assert batches == 1
        assert got["strongroom_pipeline_transactions_committed_total{pipeline=encrypt}"] == len(with_records)
        assert got["strongroom_pipeline_input_gap_offsets_total{pipeline=encrypt}"] == 0
        assert got[f"strongroom_keys_created_total{{keys_topic={env.keys_topic}}}"] == 3
        # the new wrapping key is made locally and wrapped by the KEK, bound to its id (docs/shredding.md)
        assert got["strongroom_kms_calls_total{operation=wrap,provider=local}"] >= 1

        dec_rules = {"rules": [{"topic": f"{topic}.enc"}]}
        dec = DecryptJob(spark, replace(env.settings(dec_rules, "dec"), kms=kms))
        dec.attach_metrics(registry)
        try:
            out = dec.run()
            got = scrape(server.port)  # while the job holds its key table: the lag is a live figure
        finally:
            dec.close()
        assert out.records == {"ok": 30}
        assert got["strongroom_records_total{component=decrypt,outcome=opened}"] == 30
        assert got["strongroom_records_pending{component=decrypt}"] == 0
        assert got["strongroom_records_total{component=encrypt,outcome=sealed}"] == 30  # still counted
        assert f"strongroom_keys_lookups_total{{keys_topic={env.keys_topic}}}" in got
        assert f"strongroom_keys_lag_records{{keys_topic={env.keys_topic}}}" in got
    finally:
        server.close()
