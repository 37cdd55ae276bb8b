"""``strongroom keys retire`` on a real Kafka: every subject moves to a new key, old records still open, and
the seal leases compact away; a writer's table that never saw them grants nothing under a retired key."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from strongroom.cli.main import main
from strongroom.envelope import RecordContext, decrypt_value, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey
from strongroom.keys.cache import KeyCache
from strongroom.keys.errors import RetireFailed
from strongroom.keys.records import LEASE_PREFIX, LEASES_PREFIX, NudgeRecord
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.usage import SubjectKeyLimits
from strongroom.kms.metered import MeteredKms
from strongroom.runtime import now_ms

LIMITS = SubjectKeyLimits(max_seals=10_000, lease_seals=50, creator_seals=10, slot_window=0)
SUBJECTS = [f"s{i}" for i in range(30)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(["--output", "json", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def end_offsets(client: ClientConfig, topic: str) -> dict[int, int]:
    keys_topic = KeysTopic(client, topic)
    try:
        return {p: high for p, (_, high) in keys_topic.watermarks().items()}
    finally:
        keys_topic.close()


def live_leases(client: ClientConfig, topic: str, below: dict[int, int]) -> set[bytes]:
    """Message keys of the seal-lease records still in the topic below ``below``'s offsets (not tombstones)."""
    keys_topic = KeysTopic(client, topic)
    try:
        found: dict[bytes, bool] = {}
        for r in keys_topic.scan():
            if r.key is not None and r.key[:2] in (LEASE_PREFIX, LEASES_PREFIX) and r.offset < below[r.partition]:
                found[r.key] = r.value is not None
        return {k for k, live in found.items() if live}
    finally:
        keys_topic.close()


def test_retire_moves_every_subject_to_a_new_key_and_its_leases_compact_away(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {"readers_topic": readers_topic}
    for _ in range(3):  # three writer starts: each one leases every key it uses again
        with KeyManager(client, kms, topic=keys_topic, limits=LIMITS, table_options=options) as manager:
            old = KeyCache(manager).get_or_create(SUBJECTS, seals=dict.fromkeys(SUBJECTS, 20))
            assert manager.stats()["seals"]["leases_granted"] >= len(SUBJECTS)
    sealed = {}
    for subject, key in old.items():
        assert isinstance(key, SubjectKey)
        sealed[subject] = seal(subject.encode(), key.key, key.ref, RecordContext("t", subject.encode()))
    ends = end_offsets(client, keys_topic)
    leases = live_leases(client, keys_topic, ends)
    assert len(leases) >= 3

    common = ["-b", client.bootstrap_servers, "--keys-topic", keys_topic, "--readers-topic", readers_topic]
    running = KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic).open()  # live before the retire
    try:
        planned = run(capsys, "keys", "retire", *common, "--dry-run")
        assert (planned["keys_retired"], planned["lease_records_dropped"]) == (len(SUBJECTS), len(leases))
        assert main(["keys", "retire", *common, "--dry-run"]) == 0  # as text
        assert f"would retire {len(SUBJECTS)} subject keys; would drop {len(leases)} seal-lease records" in (
            capsys.readouterr().out
        )
        assert end_offsets(client, keys_topic) == ends  # a dry run writes nothing
        assert main(["--output", "json", "keys", "retire", *common, "--partition", "99"]) != 0
        assert "has partitions 0 to 2; asked for [99]" in capsys.readouterr().err
        done = run(capsys, "keys", "retire", *common)
        assert (done["keys_retired"], done["lease_records_dropped"]) == (len(SUBJECTS), len(leases))
        assert done["lease_entries_dropped"] >= 3 * len(SUBJECTS) - len(SUBJECTS)  # the first start's creators

        running.wait_caught_up(60)
        assert all(running.subject_state(s).current_key is None for s in SUBJECTS)  # every key exhausted
    finally:
        running.close()

    deadline = time.monotonic() + 120
    with KeysWriter(client, keys_topic) as writer:
        while live_leases(client, keys_topic, ends) and time.monotonic() < deadline:
            # roll the active segments so the cleaner reaches the tombstones
            writer.write([(p, NudgeRecord(p, now_ms())) for p in ends], error=RetireFailed)
            time.sleep(2)
    assert live_leases(client, keys_topic, ends) == set(), "the dropped leases were not compacted away"

    # A writer's table that never saw those leases: every old key is spent, each subject gets a new one.
    with KeyManager(client, kms, topic=keys_topic, limits=LIMITS, table_options=options) as manager:
        new = KeyCache(manager).get_or_create(SUBJECTS, seals=dict.fromkeys(SUBJECTS, 20))
        assert manager.stats()["seals"]["leases_granted"] >= len(SUBJECTS)  # the new keys lease as usual
    for subject in SUBJECTS:
        assert isinstance(new[subject], SubjectKey)
        assert new[subject].key_id != old[subject].key_id  # type: ignore[union-attr]
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic, seal_usage=False) as reader:
        reader.wait_caught_up(60)
        for subject, envelope in sealed.items():  # old records still open
            lookup = reader.key_lookup_for(subject)
            assert decrypt_value(envelope, lookup, RecordContext("t", subject.encode())) == subject.encode()
