"""Demo chapter: Avro customer events whose ``email`` and ``name`` the schema tags PII.

A producer writes the events with confluent-kafka's Avro serializer against a real schema registry
(Apicurio, Confluent API). ``strongroom encrypt`` (JVM engine, schema mode) seals the two tagged fields
in place: every record keeps its schema id and still reads with the same deserializer, the untagged
fields stay as they were. One customer is erased; ``strongroom decrypt`` gives everyone else their
events back exactly, and the erased customer's events with an empty email and no name.
"""

from __future__ import annotations

from typing import Any

from strongroom.demo.encryption import read_topic
from strongroom.demo.story import Chapter, DemoContext
from strongroom.kafka.config import ClientConfig
from strongroom.policies import Engine

TOPIC = "customer-profiles"
EVENTS, CUSTOMERS = 200, 20
ERASED = "profile-7"


def avro_customer_events(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.keys.erasure import erase
    from strongroom.testing.schema_formats import customer_events, make_format, registry_client

    url = ctx.registry.url
    ctx.cluster.create_topic(TOPIC, partitions=2)
    serde = make_format("avro", registry_client(url), TOPIC)
    # customers of their own: the earlier chapters erased one of the cust-N customers
    events = [
        {**e, "customer_id": e["customer_id"].replace("cust-", "profile-")} for e in customer_events(EVENTS, CUSTOMERS)
    ]
    _produce(ctx, serde, events)
    ctx.say(f"    Apicurio schema registry at {url}; {EVENTS} Avro events of {CUSTOMERS} customers in {TOPIC}")
    ctx.say('    schema shop.CustomerEvent: email and name carry "confluent:tags": ["PII"]')

    sealed = _run(ctx, "encrypt", url)
    wire = read_topic(ctx, f"{TOPIC}.enc")
    sample = serde.deserialize(wire[0].value())
    ctx.say(f"    rules.yaml: - {{topic: {TOPIC}, mode: schema}}   (the PII tag selects the fields)")
    ctx.say(f"    $ strongroom encrypt --rules rules.yaml --schema-registry {url}")
    ctx.say(f"      {sealed.written} records sealed; schema id kept: {_schema_id(wire[0].value())}")
    ctx.say(f"      read back with the same Avro deserializer: customer_id={sample['customer_id']} "
            f"sku={sample['sku']} qty={sample['qty']}")  # fmt: skip
    ctx.say(f"      email={_short(sample['email'])}  name={_short(sample['name'])}  (an envelope each, base64)")
    leaked = sum(b"@example.com" in m.value() for m in wire)

    erase(ClientConfig(ctx.cluster.bootstrap_servers), [ERASED], reason="GDPR art. 17", topic=ctx.keys_topic)
    ctx.say(f"    $ strongroom erase {ERASED} --reason 'GDPR art. 17'")
    opened = _run(ctx, "decrypt", url)
    back = [serde.deserialize(m.value()) for m in read_topic(ctx, f"{TOPIC}.decrypted")]
    originals = {e["sku"]: e for e in events}
    exact = sum(record == originals[record["sku"]] for record in back)
    blanked = [r for r in back if r["customer_id"] == ERASED]
    ctx.say(f"    $ strongroom decrypt --rules rules.yaml --schema-registry {url}")
    ctx.say(f"      {exact} of {len(back)} events exactly as produced; {ERASED}'s {len(blanked)} events: "
            f"email={blanked[0]['email']!r} name={blanked[0]['name']!r} (the rest of each record intact)")  # fmt: skip
    if exact != EVENTS - len(blanked) or leaked or any(r["email"] or r["name"] is not None for r in blanked):
        raise RuntimeError("the schema-aware round trip did not hold (see the lines above)")
    return {
        "sealed": sealed.written,
        "plaintext_in_encrypted_topic": leaked,
        "decrypted_exact": exact,
        "erased_customer_events": len(blanked),
        "opened": opened.records,
    }


def _produce(ctx: DemoContext, serde: Any, events: list[dict[str, Any]]) -> None:
    from strongroom.kafka.transport import new_producer

    producer = new_producer(ClientConfig(ctx.cluster.bootstrap_servers))
    for event in events:
        producer.produce(TOPIC, value=serde.serialize(event), key=event["customer_id"].encode())
    producer.flush(30)


def _run(ctx: DemoContext, kind: str, url: str) -> Any:
    from strongroom.rules import EncryptionRules
    from strongroom.schemas.registry import RegistrySettings
    from strongroom.spark.jobs.common import PipelineSettings

    topic = TOPIC if kind == "encrypt" else f"{TOPIC}.enc"
    settings = PipelineSettings(
        ctx.cluster.bootstrap_servers,
        EncryptionRules.parse_obj_or_fail({"rules": [{"topic": topic, "mode": "schema"}]}),
        ctx.kms_config,
        str(ctx.workdir / f"chk-schema-{kind}"),
        keys_topic=ctx.keys_topic,
        engine=Engine.JVM,
        schema_registry=RegistrySettings(url=url),
    )
    if kind == "encrypt":
        from strongroom.spark.jobs.encrypt import EncryptJob

        job: Any = EncryptJob(ctx.spark, settings)
    else:
        from strongroom.spark.jobs.decrypt import DecryptJob

        job = DecryptJob(ctx.spark, settings)  # into customer-profiles.decrypted
    try:
        return job.run()
    finally:
        job.close()


def _short(sealed: str) -> str:
    return f"{sealed[:8]}…{sealed[-10:]}"


def _schema_id(value: bytes) -> int:
    return int.from_bytes(value[1:5], "big")


CHAPTERS: list[tuple[str, Chapter]] = [
    ("Avro customer events: the fields the schema tags PII sealed in place, one customer erased", avro_customer_events),
]
