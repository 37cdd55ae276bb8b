"""Key creation on a real Kafka: KMS calls grow with wrapping keys, and concurrent creators converge."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from strongroom.envelope import RecordContext, decrypt_value, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyOrDecision, KeyTable, SubjectKey, WrappingKeyPolicy, subject_partition
from strongroom.keys.errors import KeyCreationFailed
from strongroom.keys.records import NudgeRecord, encode
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.kms.metered import MeteredKms

HERE = Path(__file__).parent


def seal_for(subject: str, key: SubjectKey, text: str = "hello") -> bytes:
    return seal(f"{text} {subject}".encode(), key.key, key.ref, RecordContext("t", subject.encode()))


def test_kms_calls_follow_wrapping_keys_not_subjects(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    subjects = [f"user-{i}" for i in range(2000)]
    options = {"readers_topic": readers_topic}
    with KeyManager(
        client, kms, topic=keys_topic, wrapping=WrappingKeyPolicy(max_keys=500), table_options=options
    ) as manager:
        keys = manager.get_or_create(subjects)
        # 4 wrapping keys for 2000 subjects: resolve_alias + wrap each, nothing per subject.
        assert manager.counters["wrapping_keys_created"] == 4
        assert kms.calls == 8
        again = manager.get_or_create(["user-1", "user-1999"])
        assert again["user-1"] == keys["user-1"]
        assert kms.calls == 8
    sealed = {s: seal_for(s, k) for s, k in keys.items() if isinstance(k, SubjectKey)}
    assert len(sealed) == len(subjects)

    kms.reset()
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as reader:
        reader.wait_caught_up(30)
        for subject, envelope in sealed.items():
            opened = decrypt_value(envelope, reader.key_lookup_for(subject), RecordContext("t", subject.encode()))
            assert opened == f"hello {subject}".encode()
        # A cold reader: one KMS unwrap per wrapping key for 2000 subjects' records.
        assert kms.calls == 4
        assert reader.stats()["kms_unwraps"] == 4
        # The chain SK → WK → KEK, without KMS calls.
        kek_ref = reader.kek_of_key(keys["user-7"].key_id)  # type: ignore[union-attr]
        assert kek_ref is not None
        assert kek_ref.startswith("local:")
        assert set(reader.subjects_under_kek(kek_ref)) == set(subjects)
        links = reader.chain_of([keys["user-7"].key_id])  # type: ignore[union-attr]
        assert next(iter(links.values())).subject == "user-7"
        # Every record of a subject lives in murmur2(subject) % partitions.
        state = reader.subject_state("user-42")
        assert state.partition == subject_partition("user-42", 3)
        assert state.current_key_id == keys["user-42"].key_id  # type: ignore[union-attr]


def test_concurrent_creators_in_threads_and_processes_converge(
    client: ClientConfig, keys_topic: str, readers_topic: str, keyring: Path, kms: MeteredKms, tmp_path: Path
) -> None:
    subjects = [f"race-{i}" for i in range(150)]
    start_at = time.time() + 6.0  # every creator is up (tables caught up) by then
    subjects_file = tmp_path / "subjects.txt"
    subjects_file.write_text("\n".join(subjects))
    processes = []
    for n in range(2):
        out = tmp_path / f"proc-{n}.json"
        args = [client.bootstrap_servers, keys_topic, readers_topic, str(keyring), str(subjects_file), str(out)]
        processes.append(
            (out, subprocess.Popen([sys.executable, str(HERE / "key_creator_process.py"), *args, str(start_at)]))
        )

    results: dict[str, dict[str, SubjectKey]] = {}
    created: list[int] = []
    discarded: list[int] = []
    errors: list[BaseException] = []

    def creator(name: str) -> None:
        try:
            with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:
                time.sleep(max(0.0, start_at - time.time()))
                got = manager.get_or_create(subjects)
                results[name] = {s: k for s, k in got.items() if isinstance(k, SubjectKey)}
                created.append(manager.counters["created"])
                discarded.append(manager.counters["discarded"])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=creator, args=(f"thread-{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    envelopes: list[tuple[str, str, bytes]] = []
    for name, keys in results.items():
        assert len(keys) == len(subjects)
        envelopes += [(s, k.key_id.hex(), seal_for(s, k, name)) for s, k in keys.items()]
    for out, process in processes:
        assert process.wait(120) == 0
        written = json.loads(out.read_text())
        created.append(written["created"])
        discarded.append(written["discarded"])
        for subject, (key_id, envelope) in written["keys"].items():
            envelopes.append((subject, key_id, base64.b64decode(envelope)))
    # The creators raced (starting together, most wrote a key for most subjects; one that starts a
    # few milliseconds late finds some keys made and writes none for those); exactly one key per
    # subject won, and every other key written (never used by anyone) was tombstoned by its creator.
    assert sum(created) >= 3 * len(subjects), created
    assert sum(created) - sum(discarded) == len(subjects), (created, discarded)

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as reader:
        reader.wait_caught_up(30)
        # Converged: every creator, thread or process, ended up with the first key in partition order.
        for subject in subjects:
            current = reader.subject_state(subject).current_key_id
            assert current is not None
            assert {key_id for s, key_id, _ in envelopes if s == subject} == {current.hex()}
        assert all(len(reader.subject_state(s).keys) == 1 for s in subjects)
        # Every record any creator sealed opens with a fresh reader.
        for subject, _, envelope in envelopes:
            decrypt_value(envelope, reader.key_lookup_for(subject), RecordContext("t", subject.encode()))
    assert KeysTopic(client, keys_topic).partitions == 3


def test_warm_loads_a_batch_of_keys_and_leaves_erased_and_unknown_ones_to_lookup(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    from strongroom.envelope.errors import SubjectErased
    from strongroom.keys.erasure import erase

    subjects = [f"warm-{i}" for i in range(300)]
    with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:
        keys = manager.get_or_create(subjects)
    erase(client, ["warm-3"], reason="test", topic=keys_topic)
    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as reader:
        reader.wait_caught_up(30)
        ids = [k.key_id for k in keys.values() if isinstance(k, SubjectKey)]
        assert reader.warm([*ids, b"\xee" * 16]) == 299
        assert reader.warm(ids) == 0  # all cached (or erased) already
        misses = reader.stats()["lru"]["misses"]
        for subject in subjects:
            key = keys[subject]
            assert isinstance(key, SubjectKey)
            if subject == "warm-3":
                try:
                    reader.lookup(key.key_id, subject)
                except SubjectErased:
                    continue
                raise AssertionError("an erased key was served")
            assert reader.lookup(key.key_id, subject) == key.key
        assert reader.stats()["lru"]["misses"] == misses + 1  # only the erased key missed the cache


def test_the_writer_returns_each_records_own_offset_with_repeated_keys_and_interleaved_partitions(
    client: ClientConfig, keys_topic: str
) -> None:
    """One delivery report serves a whole batch (:class:`KeysWriter`): each record still gets its own offset,
    in the order written, also when a (partition, message key) repeats within the batch; read back, every
    offset holds the record written there."""
    topic = KeysTopic(client, keys_topic)
    before = {p: high for p, (_, high) in topic.watermarks().items()}
    batch = [(p, NudgeRecord(p, 1_000 + n)) for n in range(5) for p in (0, 1, 0)]  # key per partition: repeated
    with KeysWriter(client, keys_topic) as writer:
        offsets = writer.write(batch, error=KeyCreationFailed)
        assert writer.acknowledged == {0: 10, 1: 5}
    expected = {p: iter(range(before[p], before[p] + 10)) for p in (0, 1)}
    assert offsets == [next(expected[p]) for p, _ in batch]  # a partition's records in produce order
    written = {(p, offset): record for (p, record), offset in zip(batch, offsets, strict=True)}
    read = {(r.partition, r.offset): r.value for r in topic.scan(partitions=[0, 1]) if r.offset >= before[r.partition]}
    assert read == {place: encode(record)[1] for place, record in written.items()}


def test_requests_of_one_manager_racing_on_the_same_new_subjects_converge(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    """A pipeline's tasks ask one manager at once, often for the same new subjects: every request gets the
    subject's one current key, and no losing key is left live (a guard for any change to how the manager's
    requests share it: docs/benchmarks.md, "Requests of one manager while another waits")."""
    subjects = [f"shared-{i}" for i in range(300)]
    start = threading.Barrier(4)
    results: list[dict[str, KeyOrDecision]] = []
    errors: list[BaseException] = []
    with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:

        def request(part: list[str]) -> None:
            try:
                start.wait(30)
                results.append(manager.get_or_create(part))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        parts = [subjects, subjects[::-1], subjects[:150], subjects[100:]]
        threads = [threading.Thread(target=request, args=(part,)) for part in parts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors
        assert len(results) == len(parts)
        assert manager.counters["created"] - manager.counters["discarded"] == len(subjects)

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as reader:
        reader.wait_caught_up(30)
        for subject in subjects:
            state = reader.subject_state(subject)
            ids = {key.key_id for result in results if isinstance(key := result.get(subject), SubjectKey)}
            assert ids == {state.current_key_id}, subject
            assert len(state.keys) == 1, subject
