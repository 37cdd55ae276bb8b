"""The KEK inventory's model: per-KEK totals and the safe-to-delete answer, from the ranges found."""

from __future__ import annotations

from strongroom.recovery.dependency import KeyDependency
from strongroom.recovery.inventory import (
    CAVEATS,
    Dependency,
    Inventory,
    PartitionInventory,
    TopicInventory,
    _kek_table,
    safe_to_delete,
)
from strongroom.recovery.render import render_inventory

A3 = KeyDependency("vault:a", "a", "vault", "v3", None)
A4 = KeyDependency("vault:a", "a", "vault", "v4", None)
B = KeyDependency("aws:b", "arn:b", "aws", None, None)
DEPS = {d.label: d for d in (A3, A4, B)}


def dependency(label: str, records: int, first: int) -> Dependency:
    return Dependency(label, records, first, first + records - 1, 1, ((first, first + records - 1, records),))


TOPICS = (
    TopicInventory(
        "orders",
        (
            PartitionInventory(0, 0, 30, (dependency("vault:a@v3", 10, 0), dependency("vault:a@v4", 20, 10))),
            PartitionInventory(1, 5, 5, ()),
        ),
    ),
    TopicInventory("payments", (PartitionInventory(0, 0, 7, (dependency("vault:a@v4", 7, 0),)),)),
)


def test_each_kek_totals_its_versions_and_partitions() -> None:
    keks = {k.kek: k for k in _kek_table(TOPICS, DEPS, {"vault:a@v3": False, "vault:a@v4": True}, {}, False)}
    a = keks["vault:a"]
    assert (a.records, a.partitions, a.state) == (37, ("orders-0", "payments-0"), "unknown: no KMS configured")
    assert {v: (i.records, i.unwrappable) for v, i in a.versions.items()} == {"v3": (10, False), "v4": (27, True)}
    assert (keks["aws:b"].records, keks["aws:b"].partitions, keks["aws:b"].versions["-"].records) == (0, (), 0)


def test_safe_to_delete_answers_with_evidence_by_name_or_id() -> None:
    keks = _kek_table(TOPICS, DEPS, {}, {"vault:a": "enabled", "aws:b": "enabled"}, True)
    not_safe = safe_to_delete("a", TOPICS, keks)  # the KMS's own id finds it too
    assert (not_safe.safe_to_delete, not_safe.records_needing_it, not_safe.state) == (False, 37, "enabled")
    assert [(e.topic, e.partition, e.version) for e in not_safe.evidence] == [
        ("orders", 0, "v3"), ("orders", 0, "v4"), ("payments", 0, "v4")
    ]  # fmt: skip
    safe = safe_to_delete("aws:b", TOPICS, keks)
    assert (safe.safe_to_delete, safe.evidence) == (True, ())
    unknown = safe_to_delete("vault:nope", TOPICS, keks)
    assert (unknown.safe_to_delete, unknown.state) == (True, None)


def test_json_layout_and_text_rendering() -> None:
    keks = _kek_table(TOPICS, DEPS, {}, {}, False)
    report = Inventory("c1", "2026-11-24T00:00:00+00:00", {"format": "strongroom"}, TOPICS, keks,
                       safe_to_delete("vault:a", TOPICS, keks))  # fmt: skip
    data = report.to_json()
    assert data["caveats"] == CAVEATS
    assert data["topics"][0]["partitions"][0] == {
        "partition": 0, "log_start": 0, "end": 30, "records": 30,
        "dependencies": [
            {"label": "vault:a@v3", "records": 10, "first": 0, "last": 9, "runs": 1, "ranges": [[0, 9, 10]]},
            {"label": "vault:a@v4", "records": 20, "first": 10, "last": 29, "runs": 1, "ranges": [[10, 29, 20]]},
        ],
    }  # fmt: skip
    assert data["question"]["records_needing_it"] == 37
    assert data["question"]["evidence"][0]["version"] == "v3"
    text = render_inventory(report)
    assert "Is it safe to delete vault:a? NO — 37 record(s) still need it: orders-0 (10 records, offsets 0-9)" in text
    assert "orders-1" in text
    assert "(empty)" in text
