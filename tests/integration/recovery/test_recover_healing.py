"""A running reader resumes by itself once its KEK is restored in OpenBao — no restart.

The reader is the standard stack: ``kms_from_config`` (CachingKms over RetryingKms over Vault) and
``kms_key_lookup`` + ``decrypt_value``, retrying the record it is stuck on. The KEK is soft-deleted
before the reader starts, restored while it retries; the same reader must decrypt within the
documented bound (the cache's ``negative_ttl_seconds``) and must not hammer the KMS meanwhile.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from recovery_stack import new_kek, produce, sealed, vault

from strongroom.envelope import RecordContext, decrypt_value
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer
from strongroom.kms.caching import CachingKms
from strongroom.kms.envelope_keys import kms_key_lookup
from strongroom.kms.errors import KekDisabled, KekNotFound
from strongroom.kms.metered import MeteredKms
from strongroom.kms.retrying import RetryingKms
from strongroom.kms.vault import VaultKms

pytestmark = pytest.mark.integration
NEGATIVE_TTL = 2.0


def test_reader_heals_after_soft_delete_is_restored(kafka_cluster: Any, openbao: Any, new_topic: Any) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    writer_kms, admin = vault(openbao)
    kek = new_kek(admin)
    produce(bootstrap, topic, 0, sealed(writer_kms, kek, 20, topic=topic))
    admin.schedule_deletion(kek)  # OpenBao soft-delete: unreadable now, restorable

    metered = MeteredKms(VaultKms.from_config({"address": openbao.address, "token": openbao.token}))
    kms = CachingKms(RetryingKms(metered), negative_ttl_seconds=NEGATIVE_TTL)
    lookup = kms_key_lookup(kms)
    errors: list[str] = []
    decrypted: list[tuple[int, float]] = []
    stop = threading.Event()

    def reader() -> None:
        consumer = build_consumer(ClientConfig(bootstrap).consumer("healing-reader"))
        consumer.assign([TopicPartition(topic, 0, 0)])
        try:
            while not stop.is_set() and len(decrypted) < 20:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                while not stop.is_set():  # block-and-retry policy on this record
                    try:
                        ctx = RecordContext(topic, msg.key() or b"")
                        decrypt_value(msg.value(), lookup, ctx)
                        decrypted.append((msg.offset(), time.monotonic()))
                        break
                    except (KekNotFound, KekDisabled) as exc:
                        errors.append(f"{topic}-{msg.partition()}@{msg.offset()}: {exc.problem}")
                        time.sleep(0.1)
        finally:
            consumer.close()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        _check_healing(thread, admin, kek, topic, metered, errors, decrypted)
    finally:
        stop.set()
        thread.join(timeout=10)


def _check_healing(
    thread: threading.Thread, admin: Any, kek: str, topic: str, metered: MeteredKms,
    errors: list[str], decrypted: list[tuple[int, float]],
) -> None:  # fmt: skip
    deadline = time.monotonic() + 30
    while len(errors) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert errors, "the reader never hit the soft-deleted KEK"
    assert f"{topic}-0@0" in errors[0]
    assert kek in errors[0]
    assert "soft-deleted" in errors[0]
    time.sleep(1.0)  # keep it stuck a little longer
    stuck_calls = metered.snapshot()["calls"]
    admin.cancel_deletion(kek)
    restored_at = time.monotonic()
    thread.join(timeout=NEGATIVE_TTL + 20)
    assert len(decrypted) == 20, f"decrypted {len(decrypted)} records; last errors: {errors[-2:]}"
    healed_after = decrypted[0][1] - restored_at
    assert healed_after <= NEGATIVE_TTL + 1.5, f"healed {healed_after:.1f}s after the restore"
    # While stuck (~many attempts) the KMS was asked about once per negative TTL, not once per attempt.
    stuck_seconds = restored_at - (deadline - 30)
    assert len(errors) > stuck_calls
    assert stuck_calls <= stuck_seconds / NEGATIVE_TTL + 2
