"""Kroxylicious-format topics with OpenBao as the Vault KMS: inventory, then scan after the key is gone.

Records are built to the Kroxylicious specification (wrapper V2 + parcel V1; Vault EDEK = key name
+ ``vault:vN:`` string; DEKs from Transit's ``datakey/plaintext``), produced to a real topic.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from recovery_stack import Record, produce, run_cli

from strongroom.recovery.formats.kroxylicious import encode_record, vault_edek

pytestmark = pytest.mark.integration


def kroxylicious_records(client: Any, key: str, n: int) -> list[Record]:
    """``n`` records under one DEK from ``transit/datakey/plaintext/<key>`` (as the proxy does per window)."""
    data = client.secrets.transit.generate_data_key(name=key, key_type="plaintext", bits=256)["data"]
    dek, edek = base64.b64decode(data["plaintext"]), vault_edek(key, data["ciphertext"])
    return [encode_record(f"order {i}".encode(), dek, edek, os.urandom(12)) for i in range(n)]


def test_kroxylicious_vault_inventory_then_scan_after_deletion(
    kafka_cluster: Any, openbao: Any, spark: Any, new_topic: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("VAULT_TOKEN", openbao.token)
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=2)
    key = f"KEK-{topic}"  # the proxy's TemplateKekSelector "KEK-$(topicName)"
    client = openbao.client()
    transit = client.secrets.transit
    transit.create_key(name=key, key_type="aes256-gcm96")
    p0_v1, p1_v1 = kroxylicious_records(client, key, 40), kroxylicious_records(client, key, 30)
    transit.rotate_key(name=key)
    p0_v2, p1_v2 = kroxylicious_records(client, key, 40), kroxylicious_records(client, key, 30)
    plain: list[Record] = [(None, b"unencrypted (alias did not resolve)")] * 3 + [(None, None)]
    produce(bootstrap, topic, 0, p0_v1 + p0_v2)
    produce(bootstrap, topic, 1, p1_v1 + plain + p1_v2)
    common = ["-b", bootstrap, "--topic", topic, "--format", "kroxylicious", "--kms", "vault",
              "--vault-address", openbao.address, "--kms-attempts", "2"]  # fmt: skip

    # Inventory: which ranges need which key version; is it safe to delete the key? (no: exit 4)
    code, report, err = run_cli(capsys, ["kek", "inventory", *common, "--kek", key])
    assert code == 4, err
    deps = {
        (p["partition"], d["label"]): d for t in report["topics"] for p in t["partitions"] for d in p["dependencies"]
    }
    assert (deps[0, f"vault:{key}@v1"]["first"], deps[0, f"vault:{key}@v1"]["last"]) == (0, 39)
    assert (deps[0, f"vault:{key}@v2"]["first"], deps[0, f"vault:{key}@v2"]["last"]) == (40, 79)
    assert deps[1, f"vault:{key}@v2"]["ranges"] == [[34, 63, 30]]
    assert deps[1, "(plain)"]["records"] == 3
    assert deps[1, "(tombstone)"]["records"] == 1
    [kek] = report["keks"]
    assert kek["state"] == "enabled"
    assert kek["versions"] == {"v1": {"records": 70, "unwrappable": True}, "v2": {"records": 70, "unwrappable": True}}
    question = report["question"]
    assert question["safe_to_delete"] is False
    assert question["records_needing_it"] == 140
    code, report, _ = run_cli(capsys, ["kek", "inventory", *common, "--kek", "KEK-unused"])
    assert code == 0
    assert report["question"]["safe_to_delete"] is True

    # Version 1 retired (min_decryption_version=2): the key is enabled, but v1 records are lost.
    transit.update_key_configuration(name=key, min_decryption_version=2)
    plan_file = tmp_path / "search-only.json"
    code, plan, err = run_cli(capsys, ["recover", "scan", *common, "--no-verify", "--plan-out", str(plan_file)])
    assert code == 0, err  # unverified: no verdict on loss
    assert [p["boundary"] for p in plan["partitions"]] == [40, 30]
    assert plan["remedy"]["kind"] == "unverified"
    code, _, err = run_cli(capsys, ["recover", "apply", "-b", bootstrap, "--plan", str(plan_file), "--delete-records"])
    assert code == 1
    assert "unverified" in err

    # The key is deleted for good.
    transit.update_key_configuration(name=key, deletion_allowed=True)
    transit.delete_key(name=key)
    code, plan, err = run_cli(capsys, ["recover", "scan", *common, "--plan-out", str(tmp_path / "plan.json")])
    assert code == 4, err
    parts = {p["partition"]: p for p in plan["partitions"]}
    assert (parts[0]["boundary"], parts[0]["lost"], parts[0]["shape"]) == (80, 80, "no-readable-suffix")
    assert (parts[1]["boundary"], parts[1]["lost"], parts[1]["readable_below_boundary"]) == (64, 60, 4)
    assert parts[1]["plain"] == 3
    assert parts[1]["tombstones"] == 1
    assert plan["record_format"] == {"format": "kroxylicious", "kms": "vault"}
    assert plan["keks"] == [{"kek": f"vault:{key}", "state": "missing", "lost": True, "lost_records": 140}]
