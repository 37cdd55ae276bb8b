"""Demo chapters: encrypt PII on Spark, erase one customer, decrypt, and prove the erasure finished."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from strongroom.demo.data import PII_PATHS
from strongroom.demo.story import EVENTS_TOPIC, Chapter, DemoContext
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import new_consumer, new_producer
from strongroom.policies import Engine

ENCRYPTED_TOPIC = f"{EVENTS_TOPIC}.enc"
DECRYPTED_TOPIC = f"{EVENTS_TOPIC}.decrypted"


def _settings(ctx: DemoContext, topic: str, name: str) -> Any:
    from strongroom.rules import EncryptionRules
    from strongroom.spark.jobs.common import PipelineSettings

    rules = EncryptionRules.single([topic], mode="fields", fields=PII_PATHS)
    return PipelineSettings(
        ctx.cluster.bootstrap_servers,
        rules,
        ctx.kms_config,
        str(ctx.workdir / f"chk-{name}"),
        keys_topic=ctx.keys_topic,
        engine=Engine.JVM,  # what `strongroom encrypt`/`decrypt` run by default (docs/pipelines.md, "Engines")
    )


def read_topic(ctx: DemoContext, topic: str) -> list[Any]:
    from confluent_kafka import TopicPartition

    consumer = new_consumer(ClientConfig(ctx.cluster.bootstrap_servers))
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out, last = [], time.monotonic()
    while time.monotonic() - last < 2.0:
        msg = consumer.poll(0.3)
        if msg is not None and msg.error() is None:
            out.append(msg)
            last = time.monotonic()
    consumer.close()
    return out


def encrypt_on_spark(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.spark.jobs.encrypt import EncryptJob

    job = EncryptJob(ctx.spark, _settings(ctx, EVENTS_TOPIC, "encrypt"))
    try:
        result = job.run()
    finally:
        job.close()
    keys = result.keys
    ctx.say(
        f"    Spark encrypted {result.written} events into {ENCRYPTED_TOPIC!r} exactly once "
        f"(one Kafka transaction per source partition)"
    )
    ctx.say(
        f"    {keys['created']} customers got their own key; the KMS was asked {keys['wrapping_keys_created']} time(s) "
        "(one wrapping key for all of them, not one KMS call per customer)"
    )
    sample = json.loads(read_topic(ctx, ENCRYPTED_TOPIC)[0].value())
    shown = {k: (v[:36] + "..." if isinstance(v, str) and v.startswith("sr1:") else v) for k, v in sample.items()}
    ctx.say(
        f"    what Kafka stores now: {json.dumps({k: shown[k] for k in ('customer_id', 'name', 'email', 'order')})}"
    )
    leaked = [m for m in read_topic(ctx, ENCRYPTED_TOPIC) if b"@example.com" in (m.value() or b"")]
    ctx.say(f"    records in {ENCRYPTED_TOPIC!r} containing an e-mail address in clear: {len(leaked)}")
    ctx.facts["victim"] = sample["customer_id"]
    return {"encrypted": result.written, "subject_keys": keys["created"], "kms_wraps": keys["wrapping_keys_created"],
            "plaintext_leaks": len(leaked)}  # fmt: skip


def erase_one_customer(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.keys.erasure import erase

    victim = ctx.facts["victim"]
    receipt = erase(
        ClientConfig(ctx.cluster.bootstrap_servers), [victim], reason="GDPR art. 17 request #4711",
        requested_by="privacy-team@example.com", topic=ctx.keys_topic,
    )  # fmt: skip
    erased = receipt.subjects[0]
    ctx.say(f"    $ strongroom erase {victim} --reason 'GDPR art. 17 request #4711'")
    ctx.say(
        f"    receipt {receipt.request_id}: marker at keys partition {erased.partition} offset {erased.marker_offset}, "
        f"{erased.keys_tombstoned} key(s) tombstoned, status {receipt.status}"
    )
    return {"subject": victim, "request_id": receipt.request_id, "keys_tombstoned": erased.keys_tombstoned}


def decrypt_on_spark(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.spark.jobs.decrypt import DecryptJob

    job = DecryptJob(ctx.spark, _settings(ctx, ENCRYPTED_TOPIC, "decrypt"))
    try:
        result = job.run()
    finally:
        job.close()
    victim = ctx.facts["victim"]
    docs = [json.loads(m.value()) for m in read_topic(ctx, DECRYPTED_TOPIC)]
    victim_docs = [d for d in docs if d["customer_id"] == victim]
    others = [d for d in docs if d["customer_id"] != victim]
    ctx.say(f"    Spark decrypted {result.written} events into {DECRYPTED_TOPIC!r}:")
    other = others[0]
    ctx.say(
        f"      {other['customer_id']}: name={other['name']!r} email={other['email']!r} total={other['order']['total']}"
    )
    if victim_docs:
        v = victim_docs[0]
        ctx.say(f"      {victim} (erased): name={v['name']!r} email={v['email']!r} total={v['order']['total']}")
    pii_left = sum(1 for d in victim_docs if d["name"] or d["email"] or d["address"])
    ctx.say(
        f"    {len(victim_docs)} events of {victim} kept their order data; PII readable in {pii_left} of them; "
        f"the other {len({d['customer_id'] for d in others})} customers are intact"
    )
    batch = _decrypt_as_batch(ctx)
    return {
        "decrypted": result.written,
        "victim_events": len(victim_docs),
        "victim_pii_readable": pii_left,
        "batch_statuses": batch,
    }


def _decrypt_as_batch(ctx: DemoContext) -> dict[str, int]:
    """The same topic through the DataFrame API, as a batch Spark job would read it."""
    from pyspark.sql import functions as F

    from strongroom.keys.table import KeyTable
    from strongroom.kms.registry import kms_from_config
    from strongroom.spark.dataframes import decrypt_dataframe

    frame = (
        ctx.spark.read.format("kafka")
        .option("kafka.bootstrap.servers", ctx.cluster.bootstrap_servers)
        .option("subscribe", ENCRYPTED_TOPIC)
        .option("includeHeaders", "true")
        .load()
    )
    rules = {"rules": [{"topic": ENCRYPTED_TOPIC, "mode": "fields", "fields": PII_PATHS}]}
    client = ClientConfig(ctx.cluster.bootstrap_servers)
    with KeyTable(client, kms_from_config(ctx.kms_config), topic=ctx.keys_topic) as table:
        opened = decrypt_dataframe(frame, rules, keys=table)
        doc = F.col("value").cast("string")
        victim = ctx.facts["victim"]
        rows = opened.select(
            "status",
            (F.get_json_object(doc, "$.customer_id") == F.lit(victim)).alias("victim"),
            F.get_json_object(doc, "$.email").isNull().alias("no_email"),
        ).collect()
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    victim_rows = [r for r in rows if r["victim"]]
    ctx.say(
        f"    the same topic as a batch job (strongroom.spark.dataframes.decrypt_dataframe): statuses {statuses}; "
        f"{sum(r['no_email'] for r in victim_rows)} of {len(victim_rows)} rows of {victim} have no email"
    )
    return statuses


def verify_erasure(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.keys.verification import erasure_status

    victim = ctx.facts["victim"]
    client = ClientConfig(ctx.cluster.bootstrap_servers)
    deadline = time.monotonic() + 90
    status = erasure_status(client, [victim], topic=ctx.keys_topic)[0]
    ctx.say(f"    $ strongroom erasure status {victim}  ->  {status.status}")
    for reason in status.reasons[:2]:
        ctx.say(f"      {reason}")
    while status.status != "verified" and time.monotonic() < deadline:
        time.sleep(3)
        status = erasure_status(client, [victim], topic=ctx.keys_topic)[0]
    ctx.say(f"    after compaction: {status.status} (evidence: {json.dumps(status.evidence)[:160]}...)")
    return {"status": status.status, "evidence": status.evidence}


def refuse_disguised_plaintext(ctx: DemoContext) -> dict[str, Any]:
    """Records crafted to pass plaintext off as encrypted are refused on both sides, by policy."""

    from strongroom.rules import EncryptionRules
    from strongroom.spark.jobs.decrypt import DecryptJob
    from strongroom.spark.jobs.encrypt import EncryptJob

    source, rejected = "signup-events", "signup-events.rejected"
    for topic in (source, rejected, f"{source}.enc"):
        ctx.cluster.create_topic(topic, 1, 1)
    sealed_email = json.loads(read_topic(ctx, ENCRYPTED_TOPIC)[0].value())["email"]
    producer = new_producer(ClientConfig(ctx.cluster.bootstrap_servers))
    for key, value in (
        (b"cust-90", b'{"customer_id": "cust-90", "name": "Ada", "email": "ada@example.com"}'),
        (b"cust-91", b'{"customer_id": "cust-91", "name": "Eve", "email": "eve@example.com", "email": "'
         + sealed_email.encode() + b'"}'),
        (b"cust-92", b'{"customer_id": "cust-92", "name": "Mal\\ud800", "email": "mal@example.com"}'),
    ):  # fmt: skip
        producer.produce(source, key=key, value=value)
    producer.flush(30)
    rules = EncryptionRules.single([source], mode="fields", fields=PII_PATHS, on_reject="dead-letter")
    settings = dataclasses.replace(_settings(ctx, source, "hostile-enc"), rules=rules, dead_letter_topic=rejected)
    job = EncryptJob(ctx.spark, settings)
    try:
        encrypted = job.run()
    finally:
        job.close()
    ctx.say(f"    encrypt: {dict(encrypted.records)}; refused records go to {rejected!r}, unchanged, with a reason:")
    for msg in read_topic(ctx, rejected):
        reason = dict(msg.headers())["strongroom.dead-letter.reason"].decode()
        ctx.say(f"      {msg.key().decode()}: {reason[:110]}")
    producer.produce(f"{source}.enc", key=b"cust-93", value=b'{"customer_id": "cust-93", "email": "plain@example.com"}')
    producer.flush(30)  # someone who can write to the topic slips a plaintext record in (a downgrade)
    decrypt = dataclasses.replace(_settings(ctx, f"{source}.enc", "hostile-dec"), dead_letter_topic=rejected)
    dec = DecryptJob(ctx.spark, decrypt, on_failure="dead-letter")
    try:
        decrypted = dec.run()
    finally:
        dec.close()
    [downgrade] = [m for m in read_topic(ctx, rejected) if m.key() == b"cust-93"]
    ctx.say(f"    decrypt (readers are encrypted-only by default): {dict(decrypted.records)}")
    ctx.say(f"      cust-93: {dict(downgrade.headers())['strongroom.dead-letter.reason'].decode()[:110]}")
    return {"encrypt": dict(encrypted.records), "decrypt": dict(decrypted.records)}


def drop_seal_leases(ctx: DemoContext) -> dict[str, Any]:
    """A restarted writer claims a seal slot per keys partition instead of leasing each key again; writers
    without slots lease every key they use, and ``keys retire`` drops those leases."""
    from strongroom.keys import KeyManager, KeyTable
    from strongroom.keys.cache import KeyCache
    from strongroom.keys.retire import retire
    from strongroom.keys.usage import SubjectKeyLimits
    from strongroom.kms.registry import kms_from_config

    client = ClientConfig(ctx.cluster.bootstrap_servers)
    customers = sorted({json.loads(m.value())["customer_id"] for m in read_topic(ctx, ENCRYPTED_TOPIC)})
    customers.remove(ctx.facts["victim"])  # erased: no key to lease
    kms = kms_from_config(ctx.kms_config)
    try:
        slots = leased = 0
        for _ in range(2):  # two writer restarts over existing keys
            with KeyManager(client, kms, topic=ctx.keys_topic, table_options={"register": False}) as manager:
                KeyCache(manager).get_or_create(customers)
                stats = manager.stats()["seals"]
                slots, leased = slots + stats["slots_claimed"], leased + stats["leases_granted"]
        ctx.say(
            f"    two writer restarts over {len(customers)} existing keys wrote {slots} seal slots ({slots // 2} each: "
            f"one per keys partition, whatever the number of keys) and {leased} seal leases"
        )
        old = {}
        for _ in range(2):  # two restarts of writers without slots: each leases every key it seals with
            with KeyManager(client, kms, topic=ctx.keys_topic, limits=SubjectKeyLimits(slot_window=0),
                            table_options={"register": False}) as manager:  # fmt: skip
                old = KeyCache(manager).get_or_create(customers)
        planned = retire(client, topic=ctx.keys_topic, dry_run=True).to_dict()
        ctx.say(
            f"    two restarts of writers without slots (slot_window=0) leave {planned['lease_records_dropped']} "
            f"seal-lease records ({planned['lease_entries_dropped']} leases); every writer's key table replays them"
        )
        done = retire(client, topic=ctx.keys_topic).to_dict()
        ctx.say(
            f"    $ strongroom keys retire  ->  {done['keys_retired']} keys retired, "
            f"{done['lease_records_dropped']} lease records dropped (compaction removes them)"
        )
        first = customers[0]
        with KeyManager(client, kms, topic=ctx.keys_topic, table_options={"register": False}) as manager:
            new = KeyCache(manager).get_or_create([first])[first]
        with KeyTable(client, kms, topic=ctx.keys_topic, register=False) as table:  # a writer's: adds up leases
            table.wait_caught_up(60)
            state = table.subject_state(first)
    finally:
        kms.close()
    was, now = old[first].key_id.hex()[:8], new.key_id.hex()[:8]  # type: ignore[union-attr]
    shown = ", ".join(f"{k.key_id.hex()[:8]}… {'exhausted' if k.exhausted else 'current'}" for k in state.keys)
    ctx.say(f"    the next writer seals {first} under key {now}… instead of {was}…")
    ctx.say(f"    {first}'s keys in a writer's key table: {shown} (an exhausted key still opens old records)")
    return {"slots_claimed": slots, "leases_with_slots": leased, "keys_retired": done["keys_retired"],
            "lease_records_dropped": done["lease_records_dropped"], "rotated": was != now,
            "keys_of_subject": len(state.keys)}  # fmt: skip


CHAPTERS: list[tuple[str, Chapter]] = [
    ("Encrypt the customers' PII on Spark, one key per customer", encrypt_on_spark),
    ("Erase one customer (GDPR crypto-shredding)", erase_one_customer),
    ("Decrypt on Spark: the erased customer's PII is gone, everything else is intact", decrypt_on_spark),
    ("Prove the erasure finished", verify_erasure),
    (
        "Plaintext in disguise is refused: duplicate keys, lone surrogates, a downgraded record",
        refuse_disguised_plaintext,
    ),
    (
        "Restarted writers claim a seal slot per partition, not a lease per key; `strongroom keys retire` drops leases",
        drop_seal_leases,
    ),
]
