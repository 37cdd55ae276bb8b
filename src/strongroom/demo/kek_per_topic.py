"""Demo chapter: a KEK per topic, in two KMSes; one KEK is deleted, and exactly its topic is lost.

European orders are wrapped through ``pii-orders-eu`` in OpenBao, American ones through ``pii-orders-us``
in the local keyring: two KMSes named in one rules file, both KEKs created on first use
(``missing_kek: create``). The same customers buy on both sides, so each has a key under each KEK.
OpenBao's KEK is then deleted; ``kek inventory`` and ``recover scan`` name the European topic only.
"""

from __future__ import annotations

from typing import Any

from strongroom.demo.data import customer_events
from strongroom.demo.story import Chapter, DemoContext
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import new_producer
from strongroom.policies import Engine

EU, US = "orders-eu", "orders-us"
RULES = [
    {"topic": EU, "kek": "pii-$(topic)", "kms": "bao", "missing_kek": "create"},
    {"topic": US, "kek": "pii-$(topic)", "kms": "local", "missing_kek": "create"},
]


def kek_per_topic(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.kms.catalog import KmsCatalog

    for topic in (EU, US):
        ctx.cluster.create_topic(topic, partitions=2)
        _produce(ctx, topic, 60)
    catalog = KmsCatalog({"bao": {"provider": "vault", "address": ctx.openbao.address, "token": ctx.openbao.token},
                          "local": dict(ctx.kms_config)})  # fmt: skip
    ctx.say("    rules.yaml (the kms: section names OpenBao as 'bao' and the keyring as 'local'; tokens elided):")
    for rule in RULES:
        ctx.say(f"      - {rule}")
    keks = _encrypt(ctx, catalog)
    from strongroom.kms.admin.vault import VaultKekAdmin

    VaultKekAdmin(ctx.openbao.client()).delete_kek(f"pii-{EU}")
    ctx.say(f"    !! KEK {keks[EU]} was deleted from OpenBao; {keks[US]} is untouched")
    lost = _inventory_and_scan(ctx, catalog)
    return {"keks": keks, "lost_records": lost}


def _produce(ctx: DemoContext, topic: str, n: int) -> None:
    producer = new_producer(ClientConfig(ctx.cluster.bootstrap_servers))
    for key, value in customer_events(n, 10):  # the same ten customers in both topics
        producer.produce(topic, value=value, key=key)
    producer.flush(30)


def _encrypt(ctx: DemoContext, catalog: Any) -> dict[str, str]:
    from strongroom.rules import EncryptionRules
    from strongroom.spark.jobs.common import PipelineSettings
    from strongroom.spark.jobs.encrypt import EncryptJob

    settings = PipelineSettings(
        ctx.cluster.bootstrap_servers, EncryptionRules.parse_obj_or_fail({"rules": RULES}), {},
        str(ctx.workdir / "chk-kek-per-topic"), keys_topic=ctx.keys_topic, engine=Engine.JVM,
        kmses=catalog.configs(),
    )  # fmt: skip
    job = EncryptJob(ctx.spark, settings)
    try:
        result = job.run()
    finally:
        job.close()
    ctx.say("    $ strongroom encrypt --rules rules.yaml")
    ctx.say(f"      {result.written} records sealed into {EU}.enc and {US}.enc")
    for route, stats in sorted(result.keys["routes"].items()):
        ctx.say(
            f"      KEK {route}: {stats['created']} customer keys under {stats['wrapping_keys_created']} wrapping key"
        )
    return dict(job.keks)


def _inventory_and_scan(ctx: DemoContext, catalog: Any) -> dict[str, int]:
    from strongroom.keys.table import KeyTable
    from strongroom.kms.catalog import KmsGroup
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.formats import StrongroomFormat
    from strongroom.recovery.inventory import InventoryOptions, run_inventory
    from strongroom.recovery.kafka_io import ClusterView, KafkaProbe
    from strongroom.recovery.render import render_inventory
    from strongroom.recovery.scan import ScanOptions, run_scan
    from strongroom.recovery.spark_jobs import kafka_source_options

    config = ClientConfig(ctx.cluster.bootstrap_servers)
    kmses = KmsGroup(catalog.build(cache=False, retry={"max_attempts": 2}).values())
    view, source = ClusterView(config), kafka_source_options(config)
    lost: dict[str, int] = {}
    with KeyTable(config, kmses, topic=ctx.keys_topic, register=False).open() as chain:
        chain.wait_caught_up(60)
        checker = AvailabilityChecker(StrongroomFormat({"bao": "vault", "local": "local"}), kmses, subject_keys=chain)
        ctx.say(f"\n    $ strongroom kek inventory --topic {EU}.enc --topic {US}.enc --kms-config rules.yaml")
        report = run_inventory(ctx.spark, view, source, checker, InventoryOptions(topics=[f"{EU}.enc", f"{US}.enc"]),
                               has_kms=True)  # fmt: skip
        for line in render_inventory(report).splitlines():
            ctx.say("      " + line)
        for topic in (f"{EU}.enc", f"{US}.enc"):
            with KafkaProbe(config, topic) as probe:
                plan = run_scan(view, probe, checker, ScanOptions(topic=topic), spark=ctx.spark, source_options=source)
            lost[topic] = sum(p.lost or 0 for p in plan.partitions)
            ctx.say(f"    $ strongroom recover scan --topic {topic} --kms-config rules.yaml")
            ctx.say(f"      {lost[topic]} records lost")
    kmses.close()
    return lost


CHAPTERS: list[tuple[str, Chapter]] = [
    ("A KEK per topic in two KMSes: one is deleted, and only its topic is lost", kek_per_topic),
]
