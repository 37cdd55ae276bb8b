"""Garbage in the keys topic, a KMS outage, a lost KEK: clear errors, nothing lost, others unaffected."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from strongroom.envelope import RecordContext, SubjectErased, decrypt_value, seal
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.keys import KeyManager, KeyTable, SubjectKey, erase, subject_partition
from strongroom.keys.topic import KeysTopic
from strongroom.kms.errors import KekNotFound, KmsUnavailable
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms
from strongroom.kms.vault import VaultKms


def produce_raw(client: ClientConfig, topic: str, items: list[tuple[int, bytes, bytes | None]]) -> None:
    producer = build_producer(client.producer())
    for partition, key, value in items:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def test_corrupt_and_unknown_version_records_are_skipped_and_counted(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    options = {"readers_topic": readers_topic}
    with KeyManager(client, kms, topic=keys_topic, table_options=options) as manager:
        keys = manager.get_or_create(["alice", "carol", "dave"])
    envelopes = {
        s: seal(s.encode(), k.key, k.ref, RecordContext("t", s.encode()))
        for s, k in keys.items()
        if isinstance(k, SubjectKey)
    }
    p = {s: subject_partition(s, 3) for s in ("alice", "bob", "carol")}
    newer = b"\x02" + bytes(80)  # a subject-key value from a future format version
    produce_raw(
        client,
        keys_topic,
        [
            (p["alice"], b"k\x00alice\x00" + b"\x07" * 16, b"not json at all"),
            (p["bob"], b"k\x00bob\x00" + b"\x08" * 16, newer),
            (0, b"z\x00from the future", b"{}"),
            (1, b"w\x00" + b"\x09" * 16, b"\x00\x01garbage"),
            (p["carol"], b"e\x00carol", b"corrupt marker value"),
        ],
    )
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as table:
        table.wait_caught_up(30)
        stats = table.stats()
        assert stats["corrupt"] == 4
        assert any(f"{keys_topic}/{p['alice']}@" in problem for problem in stats["problems"])
        assert any("version 0x02" in problem for problem in stats["problems"])
        assert any("unreadable value" in problem for problem in stats["problems"])
        # Other subjects are unaffected; a damaged marker still erases (it never brings a key back).
        for subject in ("alice", "dave"):
            assert decrypt_value(
                envelopes[subject], table.key_lookup_for(subject), RecordContext("t", subject.encode())
            )
        with pytest.raises(SubjectErased):
            decrypt_value(envelopes["carol"], table.key_lookup_for("carol"), RecordContext("t", b"carol"))

    # Erasing a subject with a corrupt key record tombstones that record too.
    receipt = erase(client, ["alice"], reason="test", topic=keys_topic)
    assert receipt.subjects[0].keys_tombstoned == 2


def test_kms_outage_while_making_a_wrapping_key_writes_nothing(
    client: ClientConfig, keys_topic: str, readers_topic: str
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = VaultKms.from_config({"address": f"http://127.0.0.1:{port}", "token": "t", "timeout_seconds": 1})
    before = KeysTopic(client, keys_topic).watermarks()
    with (
        KeyManager(client, down, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager,
        pytest.raises(KmsUnavailable),
    ):
        manager.get_or_create(["alice"])
    assert KeysTopic(client, keys_topic).watermarks() == before


def test_a_lost_kek_is_never_reported_as_an_erasure(
    client: ClientConfig, keys_topic: str, readers_topic: str, keyring: Path
) -> None:
    kms = LocalKms.from_config({"path": keyring})
    with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:
        key = manager.get_or_create(["alice"])["alice"]
    assert isinstance(key, SubjectKey)
    LocalKeyringAdmin(kms.keyring).delete_kek(kms.resolve_alias("strongroom-subjects"))
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as table:
        table.wait_caught_up(30)
        with pytest.raises(KekNotFound):
            table.lookup(key.key_id, "alice")
