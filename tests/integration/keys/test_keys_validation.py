"""Key records are validated before they are trusted (real Kafka; the lost-marker check against OpenBao).

- A subject-key record outside its subject's partition is ignored and counted: it cannot outlive the
  subject's erasure (the erasure marker and the eraser only ever look at the subject's partition).
- A lost marker is applied only when the KMS confirms that the wrapping key's KEK no longer unwraps it;
  a forged one (the KEK is alive in OpenBao) is logged at error, counted, listed and not applied.
- A wrapping key's EDEK is bound to its WK id (OpenBao transit ``associated_data``): copied under
  another id it does not unwrap; an unbound EDEK (written before binding existed) still does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.cli.main import main
from strongroom.envelope import SubjectErased
from strongroom.errors import KmsError
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, erase
from strongroom.keys.errors import KeyCreationFailed, SubjectKeyLost
from strongroom.keys.lost import declare_lost
from strongroom.keys.records import NudgeRecord, SubjectKeyRecord, WrappingKeyRecord, wk_edek_context
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.wrapping import new_key_id, new_wk_id, wrap_subject_key
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.metered import MeteredKms
from strongroom.kms.vault import VaultKms
from strongroom.runtime import now_ms

PLAN = "sha256:" + "f0" * 32


def test_a_misplaced_key_record_is_ignored_and_does_not_survive_erasure(
    client: ClientConfig, keys_topic: str, kms: MeteredKms, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {"register": False}
    with KeyManager(client, kms, topic=keys_topic, table_options=options) as manager:
        alice = manager.get_or_create(["alice"])["alice"]
        assert isinstance(alice, SubjectKey)
        assert alice.wk_id is not None
        wk = manager.table.store.wrapping_key(alice.wk_id)
        assert wk is not None
        cipher = AESGCM(kms.unwrap(wk.edek))
    # A second key of alice, wrapped correctly, but written to another partition, behind enough records
    # that its offset is above the offset alice's erasure marker will get in her own partition.
    topic = KeysTopic(client, keys_topic)
    home = topic.partition_of("alice")
    elsewhere = (home + 1) % topic.partitions
    key_id, raw = new_key_id(), AESGCM.generate_key(bit_length=256)
    wrapped = wrap_subject_key(cipher, raw, b"alice", key_id, alice.wk_id)
    forged = SubjectKeyRecord("alice", key_id, alice.wk_id, wrapped, now_ms(), wk.edek.kek_ref)
    with KeysWriter(client, keys_topic) as writer:
        writer.write([(elsewhere, NudgeRecord(elsewhere, now_ms())) for _ in range(10)], error=KeyCreationFailed)
        writer.write([(elsewhere, forged)], error=KeyCreationFailed)

    with KeyTable(client, kms, topic=keys_topic, register=False) as table:
        table.wait_caught_up(30)
        assert table.lookup(key_id) is None  # never stored: no reader hands it out
        assert [k.key_id for k in table.subject_state("alice").keys] == [alice.key_id]
        stats = table.stats()
        assert stats["misplaced"] == 1
        assert any(f"not in its subject's partition {home}" in p for p in stats["problems"])

        assert main(["--output", "json", "keys", "inventory", "-b", client.bootstrap_servers,
                     "--keys-topic", keys_topic]) == 0  # fmt: skip
        assert json.loads(capsys.readouterr().out)["misplaced_key_records"] == 1

        receipt = erase(client, ["alice"], reason="misplaced-record test", topic=keys_topic)
        assert receipt.subjects[0].marker_offset < 10  # the forged record's offset is higher
    with KeyTable(client, kms, topic=keys_topic, register=False) as cold:
        cold.wait_caught_up(30)
        for kid in (alice.key_id, key_id):
            with pytest.raises(SubjectErased):
                cold.lookup(kid, "alice")


@pytest.fixture
def bao_kms(openbao: Any, unique_name: Callable[[str], str]) -> tuple[MeteredKms, VaultKekAdmin, str]:
    alias = unique_name("subjects")
    admin = VaultKekAdmin(openbao.client())
    admin.create_kek(alias)
    return MeteredKms(VaultKms.from_config({"address": openbao.address, "token": openbao.token})), admin, alias


def test_a_forged_lost_marker_is_reported_and_not_applied_while_the_kek_exists_in_openbao(
    client: ClientConfig,
    keys_topic: str,
    bao_kms: tuple[MeteredKms, VaultKekAdmin, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    kms, admin, alias = bao_kms
    with KeyManager(client, kms, topic=keys_topic, kek_alias=alias, table_options={"register": False}) as manager:
        alice = manager.get_or_create(["alice"])["alice"]
    assert isinstance(alice, SubjectKey)
    assert alice.wk_id is not None
    kek_ref = f"vault:{alias}"
    with KeyTable(client, kms, topic=keys_topic, register=False) as running:
        running.wait_caught_up(30)
        assert running.lookup(alice.key_id) == alice.key
        with caplog.at_level(logging.ERROR, logger="strongroom.keys.lost_check"):
            declare_lost(client, {alice.wk_id: kek_ref}, plan_id=PLAN, reason="forged", topic=keys_topic)
            running.wait_caught_up(30)
        assert running.lookup(alice.key_id, "alice") == alice.key  # not lost: the marker is not applied
        [refused] = running.refused_lost_markers().values()
        assert refused.kek_present
        assert "still unwraps" in refused.reason
        stats = running.stats()
        assert stats["lost_markers_not_applied"] == 1
        assert stats["wrapping_keys_declared_lost"] == 0
        assert stats["lost_markers_refused"][0]["wrapping_key"] == alice.wk_id.hex()
        [inventory] = running.wrapping_keys()
        assert inventory["lost_marker_refused"] == refused.reason
        assert inventory["declared_lost_by_plan"] is None
        assert any("NOT applied" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)

    # once the KEK is really gone from OpenBao, the same marker is honoured
    admin.delete_kek(alias)
    with KeyTable(client, kms, topic=keys_topic, register=False) as cold:
        cold.wait_caught_up(30)
        with pytest.raises(SubjectKeyLost, match=f"declared lost by plan {PLAN}"):
            cold.lookup(alice.key_id, "alice")
        assert not cold.refused_lost_markers()


def test_a_bound_wrapping_key_edek_does_not_unwrap_under_another_wk_id_in_openbao(
    client: ClientConfig, keys_topic: str, bao_kms: tuple[MeteredKms, VaultKekAdmin, str]
) -> None:
    kms, _, alias = bao_kms
    with KeyManager(client, kms, topic=keys_topic, kek_alias=alias, table_options={"register": False}) as manager:
        alice = manager.get_or_create(["alice"])["alice"]
        assert isinstance(alice, SubjectKey)
        assert alice.wk_id is not None
        stored = manager.table.store.wrapping_key(alice.wk_id)
    assert stored is not None
    edek = stored.edek
    assert edek.context == wk_edek_context(alice.wk_id)  # bound through transit's associated_data
    assert len(kms.unwrap(edek)) == 32
    for context in (wk_edek_context(new_wk_id()), b""):
        with pytest.raises(KmsError):
            kms.unwrap(dataclasses.replace(edek, context=context))
    # the EDEK copied into a wrapping-key record of another id: keys under that id cannot be opened
    other = new_wk_id()
    forged = WrappingKeyRecord(other, dataclasses.replace(edek, context=wk_edek_context(other)), now_ms())
    with KeysWriter(client, keys_topic) as writer:
        writer.write([(KeysTopic(client, keys_topic).partition_of_wrapping_key(other), forged)],
                     error=KeyCreationFailed)  # fmt: skip
    with KeyTable(client, kms, topic=keys_topic, register=False) as table:
        table.wait_caught_up(30)
        [record] = [wk for wk in table.store.wrapping_keys() if wk.wk_id == other]
        with pytest.raises(KmsError):
            kms.unwrap(record.edek)
        assert table.lookup(alice.key_id) == alice.key  # the real one still opens

    # an EDEK written before binding existed (no context) still unwraps
    legacy = kms.wrap(alias, b"\x07" * 32)
    assert legacy.context == b""
    assert kms.unwrap(legacy) == b"\x07" * 32
