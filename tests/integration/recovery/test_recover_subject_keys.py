"""Per-subject keys: a lost KEK makes some subjects unreadable, scattered through the partition.

Keys come from the real key hierarchy (``strongroom.keys``: KEK → wrapping keys → subject keys in the
keys topic). Subjects s0-s9 get wrapping keys under KEK A, s10-s19 under KEK B; their records
alternate. After A is deleted, recovery must follow subject key → wrapping key → KEK, call the loss
scattered, name the affected subject keys, and refuse to delete a prefix. Subjects s3 and s13 write
schema records (Avro, Protobuf) whose only sealed fields are bytes: raw envelopes count like the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from recovery_stack import Record, new_kek, produce, run_cli, vault

from strongroom.envelope import RecordContext, ValueMode, marker_header, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, SubjectKey, create_keys_topic
from strongroom.testing.schema_formats import sealed_bytes_record

pytestmark = pytest.mark.integration


def test_scattered_subject_key_loss(
    kafka_cluster: Any, openbao: Any, spark: Any, new_topic: Any, unique_name: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("VAULT_TOKEN", openbao.token)
    bootstrap = kafka_cluster.bootstrap_servers
    client = ClientConfig(bootstrap)
    keys_topic = unique_name("keys")
    create_keys_topic(client, keys_topic, partitions=2, replication_factor=1)
    kms, admin = vault(openbao)
    kek_a, kek_b = new_kek(admin), new_kek(admin)
    keys: dict[str, SubjectKey] = {}
    for kek, subjects in ((kek_a, [f"s{i}" for i in range(10)]), (kek_b, [f"s{i}" for i in range(10, 20)])):
        with KeyManager(client, kms, topic=keys_topic, kek_alias=kek, table_options={"register": False}) as manager:
            for subject, key in manager.get_or_create(subjects).items():
                assert isinstance(key, SubjectKey)
                keys[subject] = key
    topic = new_topic(partitions=1)
    records: list[Record] = []
    for i in range(200):
        subject = f"s{i % 20}"
        key = keys[subject]
        if subject in ("s3", "s13"):
            kind = "avro" if subject == "s3" else "protobuf"
            sealed = sealed_bytes_record(
                kind, key.key_id, key.key, photo=b"%d" % i, thumb=b"", topic=topic, subject=subject.encode()
            )
            records.append(sealed)
            continue
        value = seal(b'{"n": %d}' % i, key.key, key.ref, RecordContext(topic, subject.encode()))
        records.append(([marker_header(ValueMode.WHOLE_VALUE)], value))
    produce(bootstrap, topic, 0, records)
    admin.delete_kek(kek_a)

    common = ["-b", bootstrap, "--topic", topic, "--kms", "vault", "--vault-address", openbao.address,
              "--keys-topic", keys_topic, "--kms-attempts", "2"]  # fmt: skip
    plan_file = tmp_path / "plan.json"
    code, plan, err = run_cli(capsys, ["recover", "scan", *common, "--plan-out", str(plan_file)])
    assert code == 5, err
    [part] = plan["partitions"]
    assert part["shape"] == "scattered"
    assert part["lost"] == 100
    assert part["lost_subject_key_records"] == 100
    assert part["lost_ranges"]["runs"] == 10  # ten lost subjects, then ten readable ones, and so on
    assert part["lost_ranges"]["ranges"][:2] == [[0, 9, 10], [20, 29, 10]]
    lost = plan["lost_subject_keys"]
    assert lost["count"] == 10
    assert {e["subject_key"] for e in lost["examples"]} == {keys[f"s{i}"].key_id.hex() for i in range(10)}
    assert all(e["subject_fingerprint"].startswith("sha256:") for e in lost["examples"])
    assert "s3" not in json.dumps(lost)  # subjects are personal data: fingerprints only
    assert plan["remedy"]["kind"] == "scattered"
    assert "keys rewrap" in " ".join(plan["remedy"]["steps"])
    assert {k["kek"]: k["state"] for k in plan["keks"]} == {f"vault:{kek_a}": "missing", f"vault:{kek_b}": "enabled"}

    code, _, err = run_cli(capsys, ["recover", "apply", "-b", bootstrap, "--plan", str(plan_file), "--delete-records"])
    assert code == 1
    assert "scattered" in err

    code, report, err = run_cli(capsys, ["kek", "inventory", *common, "--kek", kek_b])
    assert code == 4, err
    deps = {d["label"]: d for d in report["topics"][0]["partitions"][0]["dependencies"]}
    assert deps[f"vault:{kek_a}@v1"]["records"] == 100
    assert deps[f"vault:{kek_a}@v1"]["runs"] == 10
    assert report["question"]["records_needing_it"] == 100
