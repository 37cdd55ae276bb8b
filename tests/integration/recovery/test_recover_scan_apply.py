"""The whole recovery path on real Kafka, OpenBao and Spark: scan → plan → apply, and every refusal."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from recovery_stack import (
    commit_offsets,
    new_kek,
    produce,
    produce_aborted,
    run_cli,
    sealed,
    vault,
    vault_args,
)

from strongroom.audit.oplog import OperationsLog
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer
from strongroom.recovery.kafka_io import ClusterView
from strongroom.recovery.search import probe_budget

pytestmark = pytest.mark.integration


@pytest.fixture
def vault_token(openbao: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRONGROOM_VAULT_TOKEN", openbao.token)


def test_prefix_loss_scan_plan_apply(
    kafka_cluster: Any, openbao: Any, spark: Any, new_topic: Any, unique_name: Any,
    vault_token: None, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=3)
    kms, admin = vault(openbao)
    kek_a, kek_b = new_kek(admin), new_kek(admin)
    # p0: 120 records under A, an aborted transaction, then 80 under B.
    produce(bootstrap, topic, 0, sealed(kms, kek_a, 120, topic=topic))
    produce_aborted(bootstrap, topic, 0, 5)
    produce(bootstrap, topic, 0, sealed(kms, kek_b, 80, topic=topic))
    # p1: two writers switched at different times: A and B alternate for a while.
    a, b = sealed(kms, kek_a, 90, topic=topic), sealed(kms, kek_b, 90, topic=topic)
    p1 = a[:85] + [r for pair in zip(a[85:], b[:5], strict=True) for r in pair] + b[5:]
    produce(bootstrap, topic, 1, p1)
    # p2 stays empty.
    below, above = unique_name("below"), unique_name("above")
    commit_offsets(bootstrap, below, topic, {0: 10, 1: 5})
    commit_offsets(bootstrap, above, topic, {0: 200, 1: 150})
    admin.delete_kek(kek_a)

    plan_file = tmp_path / "plan.json"
    args = ["recover", "scan", "-b", bootstrap, "--topic", topic, *vault_args(openbao), "--plan-out", str(plan_file)]
    code, plan, err = run_cli(capsys, args)
    assert code == 4, err
    assert "binary search done" in err  # progress is shown
    parts = {p["partition"]: p for p in plan["partitions"]}
    # p0: everything below offset 120 is lost; the aborted records and marker (120-125) are invisible.
    assert parts[0]["boundary"] == 120
    assert parts[0]["lost"] == 120
    assert parts[0]["records"] == 200
    assert parts[0]["shape"] == "prefix"
    # p1: the last A record is at 85 + 2*4 = 93, so L = 94 whatever the search found.
    assert parts[1]["boundary"] == 94
    assert parts[1]["lost"] == 90
    assert parts[1]["readable_below_boundary"] == 4  # the B records interleaved below L
    assert parts[1]["stragglers"] == sum(1 for o in range(85, 94, 2) if o >= parts[1]["searched_boundary"])
    assert parts[1]["shape"] == "prefix"
    assert parts[2]["shape"] == "empty"
    assert parts[2]["fetches"] == 0
    for p in parts.values():
        assert p["fetches"] <= probe_budget(p["end"] - p["log_start"])
    groups0 = {g["group"]: g for g in parts[0]["groups"]}
    assert groups0[below]["below_boundary"] is True
    assert groups0[above]["below_boundary"] is False
    keks = {k["kek"]: k for k in plan["keks"]}
    assert keks[f"vault:{kek_a}"]["state"] == "missing"
    assert keks[f"vault:{kek_a}"]["lost"] is True
    assert keks[f"vault:{kek_b}"]["state"] == "enabled"
    assert json.loads(plan_file.read_text())["checksum"] == plan["checksum"]

    # Dry run changes nothing.
    apply = ["recover", "apply", "-b", bootstrap, "--plan", str(plan_file)]
    code, report, err = run_cli(capsys, [*apply, "--reset-offsets", "--group", below])
    assert code == 0, err
    assert report["executed"] is False
    view = ClusterView(ClientConfig(bootstrap))
    assert view.committed(below, topic, [0, 1]) == {0: 10, 1: 5}

    # Execute: moved, recorded in the operations log, verified.
    code, report, err = run_cli(capsys, [*apply, "--reset-offsets", "--group", below, "--execute"])
    assert code == 0, err
    assert view.committed(below, topic, [0, 1]) == {0: 120, 1: 94}
    assert report["groups"][0]["verified"] == {"0": 120, "1": 94}
    assert view.committed(above, topic, [0, 1]) == {0: 200, 1: 150}  # untouched
    operations = OperationsLog(ClientConfig(bootstrap)).read(topic=topic)
    assert [op.kind for op in operations] == ["offset-reset"]
    assert operations[0].plan_id == plan["checksum"]

    # Delete records for everyone.
    code, report, err = run_cli(capsys, [*apply, "--delete-records", "--execute"])
    assert code == 0, err
    assert report["verified"] == {"0": 120, "1": 94}
    assert view.bounds(topic, [0, 1, 2]) == {0: (120, 206), 1: (94, 180), 2: (0, 0)}
    deletions = [op for op in OperationsLog(ClientConfig(bootstrap)).read(topic=topic) if op.kind == "delete-records"]
    assert [(c.partition, c.before_offset, c.after_offset) for c in deletions[0].partitions] == [
        (0, 0, 120),
        (1, 0, 94),
    ]

    # Applying again: already done, nothing to do.
    code, report, err = run_cli(capsys, [*apply, "--delete-records", "--execute"])
    assert code == 0, err
    assert {c["status"] for c in report["changes"]} == {"already past L"}


def test_refusals_edited_plan_other_cluster_active_group(
    kafka_cluster: Any, kafka_cluster_factory: Any, openbao: Any, spark: Any, new_topic: Any, unique_name: Any,
    vault_token: None, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=2)
    kms, admin = vault(openbao)
    kek_a, kek_b = new_kek(admin), new_kek(admin)
    produce(bootstrap, topic, 0, sealed(kms, kek_a, 30, topic=topic) + sealed(kms, kek_b, 30, topic=topic))
    # p1: two writers used A and B side by side all along: the loss is scattered, not a prefix.
    a, b = sealed(kms, kek_a, 20, topic=topic), sealed(kms, kek_b, 20, topic=topic)
    mixed = [r for pair in zip(a, b, strict=True) for r in pair]
    produce(bootstrap, topic, 1, mixed)
    admin.delete_kek(kek_a)
    plan_file = tmp_path / "plan.json"
    scan = ["recover", "scan", "-b", bootstrap, "--topic", topic, *vault_args(openbao), "--plan-out", str(plan_file)]
    code, plan, err = run_cli(capsys, scan)
    assert code == 5, err  # scattered loss in p1
    shapes = {p["partition"]: p["shape"] for p in plan["partitions"]}
    assert shapes == {0: "prefix", 1: "scattered"}
    assert plan["remedy"]["kind"] == "mixed"
    assert any("interleaved" in step for step in plan["remedy"]["steps"])
    apply = ["recover", "apply", "-b", bootstrap]
    view = ClusterView(ClientConfig(bootstrap))
    code, report, err = run_cli(capsys, [*apply, "--plan", str(plan_file), "--delete-records"])
    assert code == 0, err
    assert [c["partition"] for c in report["changes"]] == [0]
    assert report["skipped_scattered"] == [1]

    # Edited by hand.
    edited = json.loads(plan_file.read_text())
    edited["partitions"][0]["boundary"] = 50
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    code, _, err = run_cli(capsys, [*apply, "--plan", str(tmp_path / "edited.json"), "--delete-records", "--execute"])
    assert code == 1
    assert "modified after the scan" in err
    # Applied to another cluster (same topic name there, so only the cluster id can tell).
    other = kafka_cluster_factory(1)
    other.create_topic(topic, 2, 1)
    code, _, err = run_cli(
        capsys, ["recover", "apply", "-b", other.bootstrap_servers, "--plan", str(plan_file), "--delete-records",
                 "--execute"],
    )  # fmt: skip
    assert code == 1
    assert f"was made on cluster {plan['cluster_id']!r}" in err
    assert "nothing was done" in err
    assert view.bounds(topic, [0, 1]) == {0: (0, 60), 1: (0, 40)}

    # An active group (a member is polling) is refused, naming the member.
    group = unique_name("active")
    consumer = build_consumer(ClientConfig(bootstrap).consumer(group, {"client.id": "orders-reader-7"}))
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    try:
        code, _, err = run_cli(
            capsys, [*apply, "--plan", str(plan_file), "--reset-offsets", "--group", group, "--execute"]
        )
        assert code == 1
        assert "active consumer group" in err
        assert "orders-reader-7" in err
    finally:
        consumer.close()
    assert view.committed(group, topic, [0]) == {0: None}


def test_no_readable_suffix_and_kms_outage(
    kafka_cluster: Any, openbao: Any, spark: Any, new_topic: Any,
    vault_token: None, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    kms, admin = vault(openbao)
    kek = new_kek(admin)
    produce(bootstrap, topic, 0, sealed(kms, kek, 40, topic=topic))
    admin.schedule_deletion(kek)  # soft-deleted: restorable, but unreadable now

    plan_file = tmp_path / "plan.json"
    args = ["recover", "scan", "-b", bootstrap, "--topic", topic, "--plan-out", str(plan_file)]
    code, plan, err = run_cli(capsys, [*args, *vault_args(openbao)])
    assert code == 4, err
    [part] = plan["partitions"]
    assert (part["boundary"], part["end"], part["lost"], part["shape"]) == (40, 40, 40, "no-readable-suffix")
    assert plan["keks"][0]["state"] == "pending_deletion"
    assert "can still be restored" in plan["remedy"]["steps"][0]

    # The KMS goes away: retried, then a clear error — never "lost", no plan written.
    plan_file.unlink()
    dead = ["--kms", "vault", "--vault-address", "http://127.0.0.1:9", "--kms-attempts", "3", "--kms-deadline", "5"]
    code, plan, err = run_cli(capsys, [*args, *dead])
    assert code == 1
    assert plan is None
    assert "KMS is unavailable" in err
    assert "after 3 attempt(s)" in err
    assert "not a lost key" in err
    assert not plan_file.exists()
