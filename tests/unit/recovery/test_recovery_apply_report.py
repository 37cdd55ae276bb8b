"""The apply report's JSON keeps the layout scripts read; the text shows every change."""

from __future__ import annotations

from strongroom.recovery.apply import ApplyReport, DeletionChange, GroupReset, OffsetChange
from strongroom.recovery.render import render_apply


def test_a_dry_run_deletion_report() -> None:
    report = ApplyReport("orders", "delete-records", note="dry run: nothing was changed")
    report.changes.append(DeletionChange(0, 0, 40, 40, 2, "would delete"))
    report.skipped_scattered = [1]
    assert report.to_json() == {
        "topic": "orders", "action": "delete-records", "executed": False,
        "changes": [{"partition": 0, "log_start_before": 0, "log_start_after": 40, "lost_records": 40,
                     "readable_records_also_deleted": 2, "status": "would delete"}],
        "note": "dry run: nothing was changed", "skipped_scattered": [1],
    }  # fmt: skip
    text = render_apply(report)
    assert "would delete" in text
    assert "skipped (scattered loss, not a prefix): partitions [1]" in text


def test_an_executed_reset_report_with_its_verification() -> None:
    report = ApplyReport("orders", "reset-offsets", executed=True)
    group = GroupReset("billing", [OffsetChange(0, None, 40, "reset"), OffsetChange(1, 50, 50, "already at or past L")])
    group.operation_id, group.verified = "op-1", {"0": 40}
    report.groups.append(group)
    data = report.to_json()
    assert list(data) == ["topic", "action", "executed", "groups"]
    assert data["groups"][0] == {
        "group": "billing",
        "changes": [
            {"partition": 0, "committed_before": None, "committed_after": 40, "status": "reset"},
            {"partition": 1, "committed_before": 50, "committed_after": 50, "status": "already at or past L"},
        ],
        "operation_id": "op-1",
        "verified": {"0": 40},
    }
    text = render_apply(report)
    assert text.startswith("reset-offsets on orders (EXECUTED)")
    assert "recorded in the operations log as op-1; verified {'0': 40}" in text
