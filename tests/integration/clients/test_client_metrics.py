"""The client library's Prometheus metrics (``registry=``), scraped over HTTP from a real broker's run."""

from __future__ import annotations

import time
import urllib.request

from client_kit import ClientEnv, poll_all
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from strongroom.keys.erasure import erase
from strongroom.kms.metered import MeteredKms
from strongroom.metrics import MetricsServer, metrics_for


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one HTTP scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float | None:
    return scraped.get((name, tuple(sorted(labels.items()))))


def test_producer_consumer_key_table_and_kms_metrics_over_http(client_env: ClientEnv) -> None:
    env = client_env
    registry = CollectorRegistry()
    metered = MeteredKms(env.kms)
    manager = env.key_manager(kms=metered)
    metrics = metrics_for(registry)
    metrics.watch_key_table(env.keys_topic, manager.metric_sample)
    metrics.watch_kms(metered.sample)
    topic = env.new_topic(partitions=2)
    rules = {"rules": [{"topic": topic}]}
    producer = env.producer(rules, manager, registry=registry)
    consumer = env.consumer(rules, registry=registry)
    server = MetricsServer(registry, 0)
    try:
        for i in range(5):
            producer.produce(topic, f"order {i}".encode(), key=f"cust-{i % 2}".encode())
        producer.produce(topic, None, key=b"cust-0")  # a tombstone passes through
        assert producer.flush(30) == 0
        consumer.subscribe([f"{topic}.enc"])
        assert len(poll_all(consumer, 6)) == 6

        scraped = scrape(server.port)
        assert value(scraped, "strongroom_records_total", component="producer", outcome="sealed") == 5
        assert value(scraped, "strongroom_records_total", component="producer", outcome="passthrough") == 1
        assert value(scraped, "strongroom_records_total", component="consumer", outcome="opened") == 5
        assert value(scraped, "strongroom_records_total", component="consumer", outcome="passthrough") == 1
        assert value(scraped, "strongroom_records_pending", component="consumer") == 0
        assert value(scraped, "strongroom_keys_created_total", keys_topic=env.keys_topic) == 2
        assert value(scraped, "strongroom_keys_lag_records", keys_topic=env.keys_topic) is not None
        # the wrapping key was made through the KMS: its calls counted per operation, with their latency
        kms_calls = {dict(labels)["operation"]: n for (name, labels), n in scraped.items()
                     if name == "strongroom_kms_calls_total" and dict(labels)["provider"] == "local"}  # fmt: skip
        assert kms_calls
        assert sum(kms_calls.values()) == metered.calls
        for operation, n in kms_calls.items():
            assert value(scraped, "strongroom_kms_call_seconds_count", provider="local", operation=operation) == n

        # an erasure is applied by the manager's table and counted; the table catches up with the topic
        erase(env.client, ["cust-1"], reason="metrics test", topic=env.keys_topic)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            scraped = scrape(server.port)
            if value(scraped, "strongroom_keys_erasures_applied_total", keys_topic=env.keys_topic) == 1:
                break
            time.sleep(0.2)
        assert value(scraped, "strongroom_keys_erasures_applied_total", keys_topic=env.keys_topic) == 1
        manager.table.wait_caught_up(30)
        assert value(scrape(server.port), "strongroom_keys_lag_records", keys_topic=env.keys_topic) == 0

    finally:
        server.close()
