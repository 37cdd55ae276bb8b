"""The remedy for scattered loss under per-subject keys, end to end on the real stack.

The scattered scenario of ``test_recover_subject_keys``: subjects c0-c9 got wrapping keys under KEK A,
c10-c19 under KEK B, and their JSON events (PII in ``$.name``/``$.email``) alternate in the topic. KEK A
is disabled. ``recover scan`` calls the loss scattered and lists the lost wrapping key; ``recover
mark-lost --execute`` declares it lost. A fresh decrypting consumer with ``on_failure="fail"`` then
reads the whole topic without failing: the affected records' PII is null, every other subject
decrypts. A new scan finds nothing left to repair. ``unmark-lost`` restores the previous behaviour
(the consumer fails on the first affected record), and enabling the KEK heals it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from recovery_stack import run_cli

from strongroom.audit.oplog import OperationsLog
from strongroom.clients.consumer import DecryptingConsumer
from strongroom.clients.errors import DecryptFailed
from strongroom.clients.producer import EncryptingProducer, ProduceOutcome
from strongroom.clients.records import MessageStatus
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, create_keys_topic
from strongroom.keys.lost import read_wrapping_key_states
from strongroom.keys.topic import KeysTopic
from strongroom.kms.api import KekState
from strongroom.kms.errors import KekDisabled
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.rules import EncryptionRules

pytestmark = pytest.mark.integration

FIELDS = ["$.name", "$.email"]


def event(i: int) -> tuple[str, dict[str, Any]]:
    subject = f"c{i % 20}"
    return subject, {"n": i, "customer": subject, "name": f"Name {subject}", "email": f"{subject}@example.com"}


def read_all(consumer: DecryptingConsumer, expect: int, timeout: float = 60.0) -> list[Any]:
    import time

    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        msg = consumer.poll(0.5)  # raises DecryptFailed under on_failure="fail"
        if msg is not None:
            out.append(msg)
    return out


def test_mark_lost_lets_readers_skip_scattered_loss_on_purpose(
    kafka_cluster: Any, spark: Any, new_topic: Any, unique_name: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    bootstrap = kafka_cluster.bootstrap_servers
    client = ClientConfig(bootstrap)
    keyring = tmp_path / "keyring.json"
    kms = LocalKms.from_config({"path": str(keyring), "create": True})
    admin = LocalKeyringAdmin(kms.keyring)
    kek_a, _kek_b = admin.create_kek("subjects-a"), admin.create_kek("subjects-b")
    keys_topic = unique_name("keys")
    create_keys_topic(client, keys_topic, partitions=2, replication_factor=1)
    keys: dict[str, SubjectKey] = {}
    for alias, subjects in (
        ("subjects-a", [f"c{i}" for i in range(10)]),
        ("subjects-b", [f"c{i}" for i in range(10, 20)]),
    ):
        with KeyManager(client, kms, topic=keys_topic, kek_alias=alias, table_options={"register": False}) as manager:
            keys.update({s: k for s, k in manager.get_or_create(subjects).items() if isinstance(k, SubjectKey)})
    lost_wk = keys["c0"].wk_id
    assert {keys[f"c{i}"].wk_id for i in range(10)} == {lost_wk}

    topic = new_topic(partitions=1)
    rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": topic, "mode": "fields", "fields": FIELDS}]})
    # A writer seals only with keys under its own KEK: c0-c9's events go through a producer of KEK A,
    # the others' through one of KEK B, one event at a time so they alternate in offset order.
    originals: dict[int, dict[str, Any]] = {}
    options = {"register": False}
    with (
        KeyManager(client, kms, topic=keys_topic, kek_alias="subjects-a", table_options=options) as mgr_a,
        KeyManager(client, kms, topic=keys_topic, kek_alias="subjects-b", table_options=options) as mgr_b,
        EncryptingProducer(client, rules, mgr_a) as producer_a,
        EncryptingProducer(client, rules, mgr_b) as producer_b,
    ):
        for i in range(200):
            subject, doc = event(i)
            originals[i] = doc
            producer = producer_a if int(subject[1:]) < 10 else producer_b
            outcome = producer.produce(topic, json.dumps(doc).encode(), key=subject.encode())
            assert outcome is ProduceOutcome.ENCRYPTED
            assert producer.flush(30) == 0
        assert mgr_a.counters["created"] == mgr_b.counters["created"] == 0  # the keys made above
    admin.set_state(kek_a, KekState.DISABLED)  # lost for every reader; restorable, so the undo can be shown

    encrypted = f"{topic}.enc"
    kms_options = ["--kms", "local", "--keyring", str(keyring), "--kms-attempts", "2"]
    plan_file = tmp_path / "plan.json"
    scan = ["recover", "scan", "-b", bootstrap, "--topic", encrypted, *kms_options, "--keys-topic", keys_topic]
    code, plan, err = run_cli(capsys, [*scan, "--plan-out", str(plan_file)])
    assert code == 5, err
    assert plan["partitions"][0]["shape"] == "scattered"
    assert plan["keys_topic"] == keys_topic
    assert plan["lost_wrapping_keys"] == [
        {"wrapping_key": lost_wk.hex(), "kek": f"local:{kek_a}", "subject_keys": 10, "records": 100, "partitions": [0]}
    ]
    assert "recover mark-lost" in " ".join(plan["remedy"]["steps"])

    # dry run: reports, writes nothing
    mark = ["recover", "mark-lost", "-b", bootstrap, "--plan", str(plan_file), *kms_options]
    code, report, err = run_cli(capsys, mark)
    assert code == 0, err
    [entry] = report["wrapping_keys"]
    assert (entry["status"], entry["kek_state"], report["executed"]) == ("would mark", "disabled", False)
    assert "can still be restored" in entry["note"]
    keys_view = KeysTopic(client, keys_topic)
    assert read_wrapping_key_states(keys_view, [lost_wk])[lost_wk].marker is None

    code, report, err = run_cli(capsys, [*mark, "--execute", "--reason", "KEK A destroyed, ticket 99"])
    assert code == 0, err
    assert report["executed"]
    assert report["kms_checked"]
    assert report["wrapping_keys"][0]["status"] == "marked"
    assert report["verified"] == {lost_wk.hex(): report["wrapping_keys"][0]["offset"]}
    state = read_wrapping_key_states(keys_view, [lost_wk])[lost_wk]
    assert state.marker is not None
    assert state.marker.plan_id == plan["checksum"]
    assert state.marker.reason == "KEK A destroyed, ticket 99"
    [operation] = [op for op in OperationsLog(client).read(topic=keys_topic) if op.id == report["operation_id"]]
    assert (operation.kind, operation.plan_id) == ("keys-mark-lost", plan["checksum"])
    code, again, _ = run_cli(capsys, [*mark, "--execute"])  # idempotent
    assert code == 0
    assert again["wrapping_keys"][0]["status"].startswith("already declared lost")

    # a fresh reader under the strictest failure policy reads to the end without failing
    with KeyTable(client, kms, topic=keys_topic, register=False) as table:
        consumer = DecryptingConsumer(client, rules, table, group_id=unique_name("g"), on_failure="fail")
        try:
            consumer.subscribe([encrypted])
            got = read_all(consumer, 200)
        finally:
            consumer.close()
        assert len(got) == 200
        for msg in got:
            doc = json.loads(msg.value)
            original = originals[doc["n"]]
            assert msg.status is MessageStatus.DECRYPTED
            if int(doc["customer"][1:]) < 10:
                assert msg.erased_fields
                assert (doc["name"], doc["email"]) == (None, None)
                assert doc["customer"] == original["customer"], "non-PII survives"
            else:
                assert doc == original
        assert consumer.metrics()["erased_fields"] == 100
        assert consumer.metrics()["failed"] == 0

    code, rescan, err = run_cli(capsys, [*scan, "--plan-out", str(tmp_path / "rescan.json")])
    assert code == 0, err  # nothing left to repair
    assert rescan["lost_wrapping_keys"] == []
    assert (rescan["declared_lost"]["subject_keys"], rescan["declared_lost"]["records"]) == (10, 100)
    assert f"unmark-lost --wk {lost_wk.hex()}" in " ".join(rescan["remedy"]["steps"])

    # the undo: readers need the KEK again — failing first, healing once it is enabled
    unmark = ["recover", "unmark-lost", "-b", bootstrap, "--keys-topic", keys_topic, "--wk", lost_wk.hex()]
    code, report, err = run_cli(capsys, [*unmark, "--execute"])
    assert code == 0, err
    assert report["wrapping_keys"][0]["status"] == "unmarked"
    code, _, err = run_cli(capsys, [*unmark, "--execute"])
    assert code == 1
    assert "is declared lost" in err
    with KeyTable(client, kms, topic=keys_topic, register=False) as table:
        consumer = DecryptingConsumer(client, rules, table, group_id=unique_name("g"), on_failure="fail")
        try:
            consumer.subscribe([encrypted])
            with pytest.raises(DecryptFailed) as failed:
                read_all(consumer, 200)
            assert isinstance(failed.value.cause, KekDisabled)
            assert failed.value.offset == 0  # c0's first event: the previous behaviour, nothing skipped
            admin.set_state(kek_a, KekState.ENABLED)
            healed = read_all(consumer, 200)  # the failing record comes again, then the rest
        finally:
            consumer.close()
    assert [json.loads(m.value) for m in healed] == [originals[i] for i in range(200)]
