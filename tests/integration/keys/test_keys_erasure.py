"""Erasure on a real Kafka: receipts, propagation to running readers, verification, post-erasure policies."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from strongroom.envelope import RecordContext, SubjectErased, decrypt_value, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import (
    KeyManager,
    KeyTable,
    PolicyDecision,
    SubjectKey,
    erase,
    erasure_status,
)
from strongroom.keys.erasure import NO_KEYS_NOTE
from strongroom.keys.verification import ErasureStatus
from strongroom.kms.metered import MeteredKms


def ctx(subject: str) -> RecordContext:
    return RecordContext("events", subject.encode())


def seal_for(subject: str, key: SubjectKey, n: int = 0) -> bytes:
    return seal(f"event {n} of {subject}".encode(), key.key, key.ref, ctx(subject))


def opens(table: KeyTable, subject: str, envelope: bytes) -> bool:
    """True if it decrypts; False if the subject's key is erased. Anything else raises."""
    try:
        decrypt_value(envelope, table.key_lookup_for(subject), ctx(subject))
    except SubjectErased:
        return False
    return True


def wait_verified(
    client: ClientConfig, subjects: list[str], keys_topic: str, readers_topic: str
) -> list[ErasureStatus]:
    deadline = time.monotonic() + 90
    while True:
        statuses = erasure_status(client, subjects, topic=keys_topic, readers_topic=readers_topic)
        if all(s.status == "verified" for s in statuses) or time.monotonic() > deadline:
            return statuses
        time.sleep(1)


def test_erasure_end_to_end(client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms) -> None:
    subjects = [f"user-{i}" for i in range(20)] + ["victim"]
    options = {"readers_topic": readers_topic, "heartbeat_interval": 1.0}
    with KeyManager(client, kms, topic=keys_topic, table_options=options) as manager:
        keys = manager.get_or_create(subjects)
    sealed = {s: [seal_for(s, k, n) for n in range(3)] for s, k in keys.items() if isinstance(k, SubjectKey)}
    victim_key = keys["victim"]
    assert isinstance(victim_key, SubjectKey)

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic, heartbeat_interval=1.0) as running:
        running.wait_caught_up(30)
        assert opens(running, "victim", sealed["victim"][0])  # its key is now cached in the running reader

        receipt = erase(client, ["victim", "never-seen"], reason="GDPR art. 17, ticket 4711", requested_by="dpo",
                        topic=keys_topic)  # fmt: skip
        returned = time.monotonic()
        # Propagation to a running reader: it refuses the key within seconds of `erase` returning.
        while opens(running, "victim", sealed["victim"][0]):
            assert time.monotonic() - returned < 5, "the erasure did not reach the running reader in 5 s"
            time.sleep(0.01)
        with pytest.raises(SubjectErased):
            running.lookup(victim_key.key_id)

        by_subject = {s.subject: s for s in receipt.subjects}
        assert by_subject["victim"].keys_tombstoned == 1
        assert by_subject["victim"].key_ids == [victim_key.key_id.hex()]
        assert by_subject["never-seen"].keys_tombstoned == 0
        assert by_subject["never-seen"].note == NO_KEYS_NOTE
        assert by_subject["victim"].marker_offset > (victim_key.offset or 0)
        assert receipt.status == "pending-verification"
        assert receipt.requested_by == "dpo"
        assert "ticket 4711" in receipt.reason
        assert all(opens(running, s, sealed[s][1]) for s in subjects if s != "victim")

        statuses = wait_verified(client, ["victim", "never-seen"], keys_topic, readers_topic)
        assert [s.status for s in statuses] == ["verified", "verified"], [s.reasons for s in statuses]
        evidence = statuses[0].evidence
        assert evidence["key_records_below_marker"] == 0
        assert running.reader_id in evidence["readers_applied"]
        assert statuses[0].request is not None
        assert statuses[0].request["request_id"] == receipt.request_id

    # After `verified`: a fresh reader with full KMS access cannot open any of the subject's records.
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as fresh:
        fresh.wait_caught_up(30)
        assert not any(opens(fresh, "victim", envelope) for envelope in sealed["victim"])
        with pytest.raises(SubjectErased):
            fresh.lookup(victim_key.key_id, subject="victim")
        assert all(opens(fresh, s, e) for s in subjects if s != "victim" for e in sealed[s])
        assert fresh.subject_state("victim").erased

        # Post-erasure policies, per encryptor.
        with KeyManager(client, kms, topic=keys_topic, table=fresh) as unreadable:
            decision = unreadable.get_or_create(["victim"])["victim"]
            assert isinstance(decision, PolicyDecision)
            assert decision.key is not None
            assert not decision.key.stored
            late = seal_for("victim", decision.key, 99)  # complete stream, unreadable from birth
        with KeyManager(client, kms, topic=keys_topic, table=fresh, policy="drop") as dropping:
            dropped = dropping.get_or_create(["victim"])["victim"]
            assert isinstance(dropped, PolicyDecision)
            assert dropped.drop
        with KeyManager(client, kms, topic=keys_topic, table=fresh, policy="new-key") as renewing:
            new_key = renewing.get_or_create(["victim"])["victim"]
            assert isinstance(new_key, SubjectKey)
            reborn = seal_for("victim", new_key, 100)
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as fresh:
        fresh.wait_caught_up(30)
        assert not opens(fresh, "victim", late)  # never-stored key: erased, not "not arrived yet"
        assert opens(fresh, "victim", reborn)  # the new generation after the marker is readable
        assert not any(opens(fresh, "victim", envelope) for envelope in sealed["victim"])
    status = erasure_status(client, ["victim"], topic=keys_topic, readers_topic=readers_topic)[0]
    assert status.status == "verified"
    assert "new generation" in status.warnings[0]


def test_erasure_while_an_encryptor_is_running(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    subjects = ["victim", *(f"bystander-{i}" for i in range(9))]
    sealed: list[tuple[str, bytes]] = []
    decisions: list[PolicyDecision] = []
    stop = threading.Event()
    failures: list[BaseException] = []
    options = {"readers_topic": readers_topic, "heartbeat_interval": 1.0}

    def encryptor() -> None:
        try:
            with KeyManager(client, kms, topic=keys_topic, table_options=options) as manager:
                n = 0
                while not stop.is_set():
                    for subject, key in manager.get_or_create(subjects).items():
                        n += 1
                        if isinstance(key, PolicyDecision):
                            decisions.append(key)
                            assert key.key is not None
                            key = key.key
                        sealed.append((subject, seal_for(subject, key, n)))
                    time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=encryptor)
    thread.start()
    time.sleep(3)
    erase(client, ["victim"], reason="erasure during encryption", topic=keys_topic)
    time.sleep(3)
    stop.set()
    thread.join(60)
    assert not failures
    assert decisions, "the encryptor never saw the erasure"
    assert sum(1 for s, _ in sealed if s == "victim") > len(decisions)  # records before and after

    statuses = wait_verified(client, ["victim"], keys_topic, readers_topic)
    assert statuses[0].status == "verified", statuses[0].reasons
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as fresh:
        fresh.wait_caught_up(30)
        readable = [(s, opens(fresh, s, e)) for s, e in sealed]
    assert not any(ok for s, ok in readable if s == "victim")
    assert all(ok for s, ok in readable if s != "victim")


def test_a_stopped_persistent_reader_keeps_erasure_pending_until_it_catches_up_or_is_forgotten(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms, tmp_path: Path
) -> None:
    from strongroom.keys import forget_reader

    with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:
        key = manager.get_or_create(["alice"])["alice"]
    assert isinstance(key, SubjectKey)
    envelope = seal_for("alice", key)
    persistent = {}
    for name in ("r1", "r2"):
        table = KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic, reader_id=f"{name}-{keys_topic}",
                         store_path=tmp_path / f"{name}.sqlite").open()  # fmt: skip
        table.wait_caught_up(30)
        assert opens(table, "alice", envelope)
        table.close()  # stopped, its store (wrapped keys) stays on disk
        persistent[name] = table.reader_id

    erase(client, ["alice"], reason="test", topic=keys_topic)
    deadline = time.monotonic() + 60
    while True:
        status = erasure_status(client, ["alice"], topic=keys_topic, readers_topic=readers_topic)[0]
        compacted = not any("compaction" in r for r in status.reasons)
        if compacted or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert status.status == "pending"
    assert len(status.reasons) == 2, status.reasons
    assert all("persistent store" in r for r in status.reasons)
    assert f"--forget {persistent['r2']}" in status.reasons[1]

    # r1 comes back: it resumes from its store, applies the marker, drops the key from disk.
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic, reader_id=persistent["r1"],
                  store_path=tmp_path / "r1.sqlite") as back:  # fmt: skip
        back.wait_caught_up(30)
        assert not opens(back, "alice", envelope)
        assert back.store.live_keys("alice") == []
    # r2 never comes back: its operator deletes the store and forgets it.
    (tmp_path / "r2.sqlite").unlink()
    forget_reader(client, persistent["r2"], readers_topic)
    status = erasure_status(client, ["alice"], topic=keys_topic, readers_topic=readers_topic)[0]
    assert status.status == "verified", status.reasons
    assert persistent["r1"] in status.evidence["readers_applied"]
