"""``KeyTable.current_keys``: a writer's existing keys straight from their rows, answered exactly as the general
path (subject states, then ``KeyManager._known``) answers them, and everything else left to that path.

One keys topic on a real Kafka holds the cases the shortcut must not get wrong: subjects under two KEKs (keys of
the other one are not the writer's), a subject whose first key is exhausted (the second is current), erased
subjects (one with a key written after its marker, which a writer of the default post-erasure policy must not
use), and a wrapping key declared lost (its KEK disabled, so the table honours the marker) under which one subject
has a newer key of another wrapping key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from strongroom.kafka.config import ClientConfig
from strongroom.keys import DEFAULT_KEK_ALIAS, KeyManager, SubjectKey
from strongroom.keys.erasure import erase
from strongroom.keys.lost import declare_lost
from strongroom.keys.store import StoredKey
from strongroom.keys.usage import SubjectKeyLimits
from strongroom.kms.api import KekState
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms

OTHER_KEK, LOST_KEK = "strongroom-others", "strongroom-lost"
PLAN = "sha256:" + "c7" * 32
OPTIONS = {"register": False}


def _history(client: ClientConfig, kms: MeteredKms, keys_topic: str, keyring: Path) -> None:
    admin = LocalKeyringAdmin(LocalKms.from_config({"path": keyring}).keyring)
    for alias in (OTHER_KEK, LOST_KEK):
        admin.create_kek(alias)
    for alias, subjects in ((DEFAULT_KEK_ALIAS, ["s0", "s1", "s2", "s3", "s4"]), (OTHER_KEK, ["o0", "o1"]),
                            (LOST_KEK, ["l0", "l1"])):  # fmt: skip
        with KeyManager(client, kms, topic=keys_topic, kek_alias=alias, table_options=OPTIONS) as manager:
            manager.get_or_create(subjects)
    # s2's first key would pass its bound: the writer rotates it, so s2 has two keys, the first exhausted
    tight = SubjectKeyLimits(max_seals=10, lease_seals=4, creator_seals=0, slot_window=0)
    with KeyManager(client, kms, topic=keys_topic, limits=tight, table_options=OPTIONS) as manager:
        first = manager.get_or_create(["s2"])
        manager.charge(first, {"s2": 4})  # a lease of 4 of 10
        rotated = manager.charge(first, {"s2": 8})  # 12 > 10: denied, the key exhausted; the new key's 8 granted
        assert rotated["s2"].key_id != first["s2"].key_id  # type: ignore[union-attr]
    erase(client, ["s3", "o1"], reason="current keys test", topic=keys_topic)
    lost = LocalKms.from_config({"path": keyring})
    with KeyManager(client, kms, topic=keys_topic, kek_alias=LOST_KEK, table_options=OPTIONS) as manager:
        wk_id = manager.table.subject_state("l0").keys[0].wk_id
    admin.set_state(lost.resolve_alias(LOST_KEK), KekState.DISABLED)
    declare_lost(client, {wk_id: "local:lost"}, plan_id=PLAN, reason="KEK disabled for the test", topic=keys_topic)
    with KeyManager(client, kms, topic=keys_topic, table_options=OPTIONS) as manager:
        manager.table.wait_caught_up(30)
        manager.get_or_create(["l0"])  # l0's only key is lost: a new one after it, l0's current key from now on
    with KeyManager(client, kms, topic=keys_topic, policy="new-key", table_options=OPTIONS) as manager:
        manager.table.wait_caught_up(30)
        manager.get_or_create(["s3"])  # a key after s3's erasure marker: a writer of the default policy ignores it


def test_current_keys_answers_what_the_general_path_answers_and_leaves_it_the_rest(
    client: ClientConfig, keys_topic: str, kms: MeteredKms, keyring: Path
) -> None:
    _history(client, kms, keys_topic, keyring)
    subjects = ["s0", "s1", "s2", "s3", "s4", "o0", "o1", "l0", "l1", "never-seen"]
    with KeyManager(client, kms, topic=keys_topic, table_options=OPTIONS) as manager:
        table = manager.table
        table.wait_caught_up(30)
        assert table.lost_wrapping_keys(), "the lost marker was honoured"
        manager._refresh_other_keks()
        found, rest_states = table.current_keys(subjects, manager._current_row_picker())
        rest = list(rest_states)
        states = table.subject_states(subjects)
        assert all(rest_states[s] == states[s] for s in rest), "the rest's states are the general path's"
        for subject in subjects:
            expected = manager._known(states[subject], manager._current(states[subject]))
            if isinstance(expected, SubjectKey) and expected.stored:
                assert subject in found, subject
                got = found[subject]
                assert (got.key_id, got.key, got.wk_id, got.partition, got.offset, got.created_ms, got.stored) == (
                    expected.key_id, expected.key, expected.wk_id, expected.partition, expected.offset,
                    expected.created_ms, True,
                ), subject  # fmt: skip
            else:
                assert subject in rest, subject
        assert sorted(found) == ["l0", "s0", "s1", "s2", "s4"]  # l0 and s2 by their second keys
        assert found["s2"].key_id == states["s2"].keys[1].key_id
        assert found["l0"].key_id == states["l0"].keys[1].key_id
        assert states["s3"].keys
        assert states["s3"].erasure is not None
        assert sorted(rest) == ["l1", "never-seen", "o0", "o1", "s3"]
        assert len(set(found) | set(rest)) == len(subjects)

        # The table's side of the contract, whatever the writer's rule: rows of keys declared lost are never
        # offered (l0's lost key is under another KEK, so the writer's own rule would skip it anyway).
        lost_wks = set(table.lost_wrapping_keys())
        offered: list[StoredKey] = []

        def first_offered(rows: Sequence[StoredKey]) -> StoredKey | None:
            offered.extend(rows)
            return rows[0] if rows else None

        anyones, _ = table.current_keys(subjects, first_offered)
        assert {row.subject for row in offered} >= {"l0", "o0"}
        assert not any(r.wk_id in lost_wks for r in offered)
        assert anyones["l0"].key_id == states["l0"].keys[1].key_id

        # A lost marker the table applies while the rows are unwrapped: the key is not answered.
        marker = next(iter(table.lost_wrapping_keys().values()))

        def losing(rows: Sequence[StoredKey]) -> StoredKey | None:
            with table._lock:
                table._lost = {**table._lost, rows[0].wk_id: marker}
            return rows[0]

        before = dict(table._lost)
        try:
            lost_meanwhile, rest_states = table.current_keys(["s0"], losing)
            assert lost_meanwhile == {}
            assert list(rest_states) == ["s0"]
        finally:
            with table._lock:
                table._lost = before

        # An erasure applied while the rows are read: nothing is answered from them.
        live_keys_many = table.store.live_keys_many

        def racing(wanted: list[str]) -> object:
            rows = live_keys_many(wanted)
            with table._lock:
                table._evictions += 1  # what the applier does after committing an erasure
            return rows

        table.store.live_keys_many = racing  # type: ignore[method-assign]
        raced, rest_states = table.current_keys(["s0", "s1"], manager._current_row_picker())
        assert raced == {}
        assert list(rest_states) == ["s0", "s1"]
