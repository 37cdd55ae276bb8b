"""Lost markers on a real Kafka: running and cold key tables honour them, key managers move on, undo restores.

A key table honours a lost marker only when the KMS confirms that the wrapping key's KEK no longer
unwraps it, so every scenario here makes the loss real: the two wrapping keys hang under two KEKs, and
the lost one's KEK is disabled before it is declared lost (and enabled again before the undo).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from strongroom.envelope import RecordContext, SubjectErased, decrypt_json_fields, decrypt_value, seal
from strongroom.envelope.json_fields import encrypt_json_fields
from strongroom.kafka.config import ClientConfig
from strongroom.keys import DEFAULT_KEK_ALIAS, KeyManager, KeyTable, SubjectKey, WrappingKeyPolicy
from strongroom.keys.errors import SubjectKeyLost
from strongroom.keys.lost import declare_lost, read_wrapping_key_states, undeclare_lost
from strongroom.keys.topic import KeysTopic
from strongroom.kms.api import KekState
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms

PLAN = "sha256:" + "5e" * 32


def ctx(subject: str) -> RecordContext:
    return RecordContext("events", subject.encode())


OTHER_KEK = "strongroom-others"


def make_keys(client: ClientConfig, kms: MeteredKms, keys_topic: str, keyring: Path) -> dict[str, SubjectKey]:
    """Ten subjects under two wrapping keys (five keys per WK), each WK under a KEK of its own: s0-s4 under
    the default KEK, s5-s9 under :data:`OTHER_KEK`."""
    LocalKeyringAdmin(LocalKms.from_config({"path": keyring}).keyring).create_kek(OTHER_KEK)
    out: dict[str, SubjectKey] = {}
    for alias, subjects in ((DEFAULT_KEK_ALIAS, range(5)), (OTHER_KEK, range(5, 10))):
        with KeyManager(
            client, kms, topic=keys_topic, kek_alias=alias, wrapping=WrappingKeyPolicy(max_keys=5),
            table_options={"register": False},
        ) as manager:  # fmt: skip
            keys = manager.get_or_create([f"s{i}" for i in subjects])
        out.update({s: k for s, k in keys.items() if isinstance(k, SubjectKey)})
    assert len({k.wk_id for k in out.values()}) == 2
    return out


def set_kek_state(keyring: Path, kms: MeteredKms, state: KekState) -> None:
    """Disable (lose) or enable (restore) the default KEK, which wraps s0-s4's wrapping key."""
    LocalKeyringAdmin(LocalKms.from_config({"path": keyring}).keyring).set_state(
        kms.resolve_alias(DEFAULT_KEK_ALIAS), state
    )


def wait_lost(table: KeyTable, key: SubjectKey, lost: bool, timeout: float = 10.0) -> float:
    """Seconds until ``table`` answers lost (or not) for ``key``."""
    started = time.monotonic()
    while True:
        try:
            table.lookup(key.key_id, key.subject)
            now_lost = False
        except SubjectKeyLost:
            now_lost = True
        if now_lost == lost:
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, f"the key table did not follow the marker within {timeout}s"
        time.sleep(0.01)


def test_marker_reaches_running_and_cold_tables_and_undo_restores(
    client: ClientConfig, keys_topic: str, kms: MeteredKms, tmp_path: Path, keyring: Path
) -> None:
    keys = make_keys(client, kms, keys_topic, keyring)
    lost_wk = keys["s0"].wk_id
    victims = [s for s, k in keys.items() if k.wk_id == lost_wk]
    others = [s for s in keys if s not in victims]
    kek_ref = f"local:{kms.resolve_alias('strongroom-subjects')}"
    whole = {s: seal(f"order of {s}".encode(), keys[s].key, keys[s].ref, ctx(s)) for s in keys}
    fields = {
        s: encrypt_json_fields(b'{"id": 1, "email": "x@example.com"}', ["$.email"], keys[s].key, keys[s].ref, ctx(s))
        for s in keys
    }
    store = tmp_path / "persistent.sqlite"
    with KeyTable(client, kms, topic=keys_topic, register=False, store_path=store) as running:
        running.wait_caught_up(30)
        assert running.lookup(keys[victims[0]].key_id) == keys[victims[0]].key  # cached in the running reader

        set_kek_state(keyring, kms, KekState.DISABLED)  # the KEK is lost for every reader
        receipt = declare_lost(client, {lost_wk: kek_ref}, plan_id=PLAN, reason="KEK deleted", declared_by="ops",
                               topic=keys_topic)  # fmt: skip
        assert receipt.verified
        [written] = receipt.written
        assert written.wrapping_key == lost_wk.hex()
        assert written.partition == KeysTopic(client, keys_topic).partition_of_wrapping_key(lost_wk)
        assert wait_lost(running, keys[victims[0]], True) < 5  # propagation: like an erasure marker

        calls = kms.snapshot()["calls"]
        for subject in victims:
            with pytest.raises(SubjectKeyLost, match=f"declared lost by plan {PLAN}") as info:
                running.lookup(keys[subject].key_id, subject)
            assert isinstance(info.value, SubjectErased)
            assert subject not in str(info.value)
            # the envelope path: a whole value is erased-like, a JSON field becomes null
            with pytest.raises(SubjectErased):
                decrypt_value(whole[subject], running.key_lookup_for(subject), ctx(subject))
            opened = decrypt_json_fields(fields[subject], running.key_lookup_for(subject), ctx(subject))
            assert opened == b'{"id":1,"email":null}'
            declared = running.declared_lost(keys[subject].key_id)
            assert declared is not None
            assert declared.plan_id == PLAN
        assert kms.snapshot()["calls"] == calls, "lost keys are answered from the table, without the KMS"
        for subject in others:
            assert decrypt_value(whole[subject], running.key_lookup_for(subject), ctx(subject)) == (
                f"order of {subject}".encode()
            )
        stats = running.stats()
        assert stats["wrapping_keys_declared_lost"] == 1
        assert stats["lost_lookups"] >= len(victims)
        assert running.subject_state(victims[0]).keys[0].lost_by_plan == PLAN
        [link] = running.chain_of([keys[victims[0]].key_id]).values()
        assert link.lost is not None
        assert link.lost.plan_id == PLAN

    # a cold reader (and a restarted persistent one) knows it too
    with KeyTable(client, kms, topic=keys_topic, register=False) as cold:
        cold.wait_caught_up(30)
        with pytest.raises(SubjectKeyLost):
            cold.lookup(keys[victims[1]].key_id)
        assert cold.lookup(keys[others[0]].key_id) == keys[others[0]].key
    with KeyTable(client, kms, topic=keys_topic, register=False, store_path=store) as resumed:
        with pytest.raises(SubjectKeyLost):  # from the store, before catching up
            resumed.lookup(keys[victims[1]].key_id)

        # the undo: the KEK is restored, the marker tombstoned; the running reader uses the keys again
        set_kek_state(keyring, kms, KekState.ENABLED)
        undone = undeclare_lost(client, [lost_wk], reason="KEK restored", topic=keys_topic)
        assert undone.verified
        assert wait_lost(resumed, keys[victims[1]], False) < 5
        assert resumed.lookup(keys[victims[1]].key_id) == keys[victims[1]].key
    state = read_wrapping_key_states(KeysTopic(client, keys_topic), [lost_wk])[lost_wk]
    assert state.marker is None
    assert state.record is not None
    assert state.kek_ref == kek_ref


def test_key_managers_give_subjects_with_lost_keys_a_new_key_and_converge(
    client: ClientConfig, keys_topic: str, kms: MeteredKms, keyring: Path
) -> None:
    keys = make_keys(client, kms, keys_topic, keyring)
    lost_wk = keys["s0"].wk_id
    victims = sorted(s for s, k in keys.items() if k.wk_id == lost_wk)
    set_kek_state(keyring, kms, KekState.DISABLED)
    declare_lost(client, {lost_wk: "local:whatever"}, plan_id=PLAN, reason="gone", topic=keys_topic)
    options = {"register": False}
    with (  # new keys go under the KEK that is still there
        KeyManager(client, kms, topic=keys_topic, kek_alias=OTHER_KEK, table_options=options) as first,
        KeyManager(client, kms, topic=keys_topic, kek_alias=OTHER_KEK, table_options=options) as second,
    ):
        first.table.wait_caught_up(30)
        second.table.wait_caught_up(30)
        a = first.get_or_create([*victims, "s-new"])
        b = second.get_or_create(victims)
        # If second's table had not yet seen first's keys, second created keys of its own, lost the
        # convergence and tombstoned them; first's table sees those tombstones once caught up.
        first.table.wait_caught_up(30)
        for subject in victims:
            new_a, new_b = a[subject], b[subject]
            assert isinstance(new_a, SubjectKey)
            assert isinstance(new_b, SubjectKey)
            assert new_a.key_id != keys[subject].key_id, "a new generation, not the lost key"
            assert new_a.wk_id != lost_wk
            assert (new_b.key_id, new_b.key) == (new_a.key_id, new_a.key), "both creators converge"
            state = first.table.subject_state(subject)
            assert [k.lost for k in state.keys] == [True, False]  # the lost key stays, skipped
            assert state.current_key_id == new_a.key_id
        unaffected = next(s for s in keys if s not in victims)
        assert first.get_or_create([unaffected])[unaffected] == keys[unaffected]  # type: ignore[comparison-overlap]

    set_kek_state(keyring, kms, KekState.ENABLED)
    undeclare_lost(client, [lost_wk], reason="KEK restored", topic=keys_topic)
    with KeyTable(client, kms, topic=keys_topic, register=False) as table:
        table.wait_caught_up(30)
        # both generations open again; the first in partition order is current again
        assert table.lookup(keys[victims[0]].key_id) == keys[victims[0]].key
        assert table.lookup(a[victims[0]].key_id) == a[victims[0]].key  # type: ignore[union-attr]
        assert table.subject_state(victims[0]).current_key_id == keys[victims[0]].key_id
