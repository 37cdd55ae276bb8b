"""KEK rotation on OpenBao Transit: rewrap wrapping keys, retire the old version, move to a new KEK."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strongroom.cli.main import main
from strongroom.envelope import RecordContext, decrypt_value, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, WrappingKeyPolicy, rewrap
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.metered import MeteredKms
from strongroom.kms.vault import VaultKms


def test_rewrap_then_retire_the_old_version_then_move_to_a_new_kek(
    client: ClientConfig,
    keys_topic: str,
    readers_topic: str,
    openbao: Any,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alias = unique_name("subjects")
    admin = VaultKekAdmin(openbao.client())
    admin.create_kek(alias)
    kms = MeteredKms(VaultKms.from_config({"address": openbao.address, "token": openbao.token}))
    subjects = [f"s{i}" for i in range(25)]
    with KeyManager(client, kms, topic=keys_topic, kek_alias=alias, wrapping=WrappingKeyPolicy(max_keys=10),
                    table_options={"readers_topic": readers_topic}) as manager:  # fmt: skip
        keys = manager.get_or_create(subjects)
    sealed = {
        s: seal(s.encode(), k.key, k.ref, RecordContext("t", s.encode()))
        for s, k in keys.items()
        if isinstance(k, SubjectKey)
    }

    def all_readable() -> int:
        kms.reset()
        with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as table:
            table.wait_caught_up(30)
            for subject, envelope in sealed.items():
                assert decrypt_value(envelope, table.key_lookup_for(subject), RecordContext("t", subject.encode()))
        return kms.calls

    admin.rotate_kek(alias)
    report = rewrap(client, kms, topic=keys_topic)
    assert (report.wrapping_keys, report.rewrapped, report.skipped) == (3, 3, 0)
    assert report.versions_before == {f"vault:{alias}": {"1": 3}}
    assert report.versions_after == {f"vault:{alias}": {"2": 3}}
    assert "min_decryption_version=2" in report.retire[0]

    # Idempotent: a rerun (through the CLI) finds nothing to do.
    config = tmp_path / "kms.json"
    config.write_text(json.dumps({"provider": "vault", "address": openbao.address, "token": openbao.token}))
    argv = ["--output", "json", "keys", "rewrap", "-b", client.bootstrap_servers, "--keys-topic", keys_topic,
            "--kms-config", str(config)]  # fmt: skip
    assert main(argv) == 0
    rerun = json.loads(capsys.readouterr().out)
    assert (rerun["rewrapped"], rerun["skipped"]) == (0, 3)

    # Retire version 1: the keys topic no longer needs it.
    openbao.client().secrets.transit.update_key_configuration(name=alias, min_decryption_version=2)
    assert all_readable() == 3  # one unwrap per wrapping key

    # Move everything to a new KEK and delete the old one.
    new_alias = unique_name("subjects-next")
    admin.create_kek(new_alias)
    moved = rewrap(client, kms, topic=keys_topic, to_kek_alias=new_alias)
    assert moved.rewrapped == 3
    assert moved.versions_after == {f"vault:{new_alias}": {"1": 3}}
    admin.delete_kek(alias)
    assert all_readable() == 3
    with KeyTable(client, None, topic=keys_topic, register=False) as table:
        table.wait_caught_up(30)
        assert set(table.subjects_under_kek(f"vault:{new_alias}")) == set(subjects)
        assert list(table.subjects_under_kek(f"vault:{alias}")) == []
