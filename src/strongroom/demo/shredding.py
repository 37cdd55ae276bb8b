"""Demo chapter: crypto-shred one customer and prove it (keys side; the erasure demo over the pipelines
reuses :func:`erase_and_verify`).

Uses the demo stack's Kafka and OpenBao (Vault Transit) and a keys topic of its own with compaction
settings shortened to seconds, so verification completes within the chapter.
"""

from __future__ import annotations

import time
from typing import Any

from strongroom.demo.story import Chapter, DemoContext

DEMO_KEYS_TOPIC = "demo-strongroom-keys"
DEMO_READERS_TOPIC = "demo-strongroom-key-readers"
#: Compaction within seconds (the demo broker checks retention every 2 s, backs the cleaner off 1 s).
FAST_COMPACTION = {
    "segment.ms": "1000",
    "max.compaction.lag.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}


def erase_and_verify(ctx: DemoContext, client: Any, subject: str, *, topic: str, readers_topic: str) -> dict[str, Any]:
    """Erase ``subject`` and poll ``erasure status`` until verified (at most 60 s); narrate both."""
    from strongroom.keys import erase, erasure_status

    receipt = erase(client, [subject], reason="demo: GDPR art. 17 request", requested_by="demo", topic=topic)
    ctx.say(
        f"    erase {subject}: marker at {topic}/{receipt.subjects[0].partition}@{receipt.subjects[0].marker_offset}, "
        f"{receipt.keys_tombstoned} key tombstoned, request {receipt.request_id[:8]}…"
    )
    started = time.monotonic()
    status = erasure_status(client, [subject], topic=topic, readers_topic=readers_topic)[0]
    while status.status != "verified" and time.monotonic() - started < 60:
        time.sleep(1)
        status = erasure_status(client, [subject], topic=topic, readers_topic=readers_topic)[0]
    seconds = round(time.monotonic() - started, 1)
    if status.status == "verified":
        ev = status.evidence
        ctx.say(
            f"    erasure status: verified after {seconds}s — partition {ev['partition']} read from offset "
            f"{ev['scanned_from_offset']} to {ev['scanned_to_offset']}, no key record below the marker, "
            f"{len(ev['readers_applied'])} running reader(s) applied it"
        )
    else:
        ctx.say(f"    erasure status: {status.status} after {seconds}s: {'; '.join(status.reasons)}")
    return {"receipt": receipt.to_dict(), "status": status.status, "verified_after_seconds": seconds}


def crypto_shredding(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.envelope import RecordContext, SubjectErased, decrypt_value, seal
    from strongroom.kafka.config import ClientConfig
    from strongroom.keys import KeyManager, KeyTable, SubjectKey, create_keys_topic
    from strongroom.kms.admin.vault import VaultKekAdmin
    from strongroom.kms.metered import MeteredKms
    from strongroom.kms.vault import VaultKms

    client = ClientConfig(ctx.cluster.bootstrap_servers, extra={"log_level": 0})
    create_keys_topic(client, DEMO_KEYS_TOPIC, partitions=3, config_overrides=FAST_COMPACTION)
    VaultKekAdmin(ctx.openbao.client()).create_kek("strongroom-subjects")
    kms = MeteredKms(VaultKms.from_config({"address": ctx.openbao.address, "token": ctx.openbao.token}))
    customers = [f"customer-{i}" for i in range(1, 1001)]
    options = {"readers_topic": DEMO_READERS_TOPIC}
    with KeyManager(client, kms, topic=DEMO_KEYS_TOPIC, table_options=options) as manager:
        keys = manager.get_or_create(customers)
    ctx.say(
        f"    {len(customers)} customers got their own key with {kms.calls} KMS calls "
        f"({manager.counters['wrapping_keys_created']} wrapping key under the Transit KEK 'strongroom-subjects')"
    )

    def event(subject: str) -> bytes:
        key = keys[subject]
        assert isinstance(key, SubjectKey)
        return seal(
            f'{{"customer": "{subject}", "email": "..."}}'.encode(),
            key.key,
            key.ref,
            RecordContext("orders", subject.encode()),
        )

    victim = "customer-42"
    sealed = {s: event(s) for s in (victim, "customer-7", "customer-999")}

    def readable(table: KeyTable, subject: str) -> bool:
        try:
            decrypt_value(sealed[subject], table.key_lookup_for(subject), RecordContext("orders", subject.encode()))
        except SubjectErased:
            return False
        return True

    with KeyTable(
        client, kms, topic=DEMO_KEYS_TOPIC, readers_topic=DEMO_READERS_TOPIC, heartbeat_interval=1.0
    ) as running:
        running.wait_caught_up(60)
        ctx.say(f"    a running reader decrypts {victim}'s event: {readable(running, victim)}")
        facts = erase_and_verify(ctx, client, victim, topic=DEMO_KEYS_TOPIC, readers_topic=DEMO_READERS_TOPIC)
        ctx.say(f"    the running reader decrypts {victim}'s event now: {readable(running, victim)}")
    with KeyTable(client, kms, topic=DEMO_KEYS_TOPIC, readers_topic=DEMO_READERS_TOPIC) as fresh:
        fresh.wait_caught_up(60)
        others = all(readable(fresh, s) for s in sealed if s != victim)
        gone = not readable(fresh, victim)
        ctx.say(
            f"    a fresh reader with full KMS access: {victim} unreadable: {gone}; "
            f"other customers readable: {others} ({fresh.stats()['kms_unwraps']} KMS unwrap for all of them)"
        )
    kms.close()
    return {**facts, "customers": len(customers), "victim_unreadable": gone, "others_readable": others}


CHAPTERS: list[tuple[str, Chapter]] = [
    ("Crypto-shredding: erase one customer, prove it finished", crypto_shredding),
]
