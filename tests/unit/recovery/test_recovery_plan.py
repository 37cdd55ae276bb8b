"""Plan files: the checksum catches every edit, bad files get a clear error, writes are atomic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from strongroom.recovery.errors import PlanInvalid, PlanRejected
from strongroom.recovery.plan import PLAN_FORMAT, Shape, checksum_of, load_plan, seal_plan, write_plan


def sample_plan() -> dict[str, Any]:
    return seal_plan(
        {
            "format": PLAN_FORMAT,
            "cluster_id": "abc",
            "topic": "orders",
            "verified": True,
            "keks": [{"kek": "vault:a", "state": "missing", "lost": True, "lost_records": 10}],
            "partitions": [
                {"partition": 0, "log_start": 0, "end": 100, "boundary": 10, "shape": "prefix", "groups": []}
            ],
        }
    )


def test_round_trip(tmp_path: Path) -> None:
    plan = sample_plan()
    write_plan(plan, tmp_path / "p.json")
    loaded = load_plan(tmp_path / "p.json")
    assert loaded.to_json() == plan
    assert (loaded.topic, loaded.cluster_id, loaded.verified) == ("orders", "abc", True)
    [partition] = loaded.partitions
    assert (partition.boundary, partition.shape, partition.prefix_to_delete) == (10, Shape.PREFIX, True)
    assert loaded.lost_keks == ["vault:a"]
    assert not (tmp_path / "p.json.tmp").exists()


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: p["partitions"][0].__setitem__("boundary", 50),
        lambda p: p.__setitem__("cluster_id", "other"),
        lambda p: p.__setitem__("topic", "payments"),
        lambda p: p["keks"][0].__setitem__("state", "enabled"),
        lambda p: p.__setitem__("extra", 1),
    ],
)
def test_any_edit_is_refused(tmp_path: Path, edit: Any) -> None:
    plan = sample_plan()
    edit(plan)
    (tmp_path / "p.json").write_text(json.dumps(plan))
    with pytest.raises(PlanRejected, match="modified after the scan"):
        load_plan(tmp_path / "p.json")


def test_whitespace_and_key_order_do_not_matter(tmp_path: Path) -> None:
    plan = sample_plan()
    (tmp_path / "p.json").write_text(json.dumps(dict(reversed(list(plan.items())))))
    assert load_plan(tmp_path / "p.json").checksum == checksum_of(plan)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "is not a strongroom-recovery-plan/1"),
        ('{"format": "something-else"}', "is not a strongroom-recovery-plan/1"),
        (json.dumps({"format": PLAN_FORMAT, "topic": "t"}), "lacks cluster_id"),
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be a plan"),
        ("\udcff{}", "is not UTF-8 text"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, match: str) -> None:
    (tmp_path / "p.json").write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(PlanInvalid, match=match):
        load_plan(tmp_path / "p.json")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PlanInvalid, match="cannot read plan file"):
        load_plan(tmp_path / "nope.json")


def test_boundary_outside_the_log_is_invalid_even_with_a_fresh_checksum(tmp_path: Path) -> None:
    plan = sample_plan()
    plan["partitions"][0]["boundary"] = 500
    seal_plan(plan)
    (tmp_path / "p.json").write_text(json.dumps(plan))
    with pytest.raises(PlanInvalid, match="outside its log"):
        load_plan(tmp_path / "p.json")
