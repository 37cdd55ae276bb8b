"""Overdue erasures as watcher alerts (pure part): one per overdue erasure, subject by fingerprint only."""

from __future__ import annotations

from strongroom.audit.erasure_deadlines import ERASURE_OVERDUE, overdue_alerts
from strongroom.envelope.errors import subject_fingerprint
from strongroom.keys.verification import ErasureStatus


def status(subject: str, *, overdue: bool) -> ErasureStatus:
    return ErasureStatus(
        subject, "pending", 1, request={"request_id": f"req-{len(subject)}", "marker_offset": 7},
        reasons=["1 erased key record(s) ... are still in the log"], compaction_deadline="2026-11-26T03:00:00Z",
        overdue=overdue,
    )  # fmt: skip


def test_only_overdue_erasures_become_alerts_naming_the_request_not_the_subject() -> None:
    alerts = overdue_alerts([status("alice@example.com", overdue=True), status("bob", overdue=False)], "keys")
    assert [a.kind for a in alerts] == [ERASURE_OVERDUE]
    alert = alerts[0]
    assert alert.is_alert
    assert (alert.topic, alert.partition) == ("keys", 1)
    assert alert.evidence["request_id"] == "req-17"
    fingerprint = subject_fingerprint(b"alice@example.com")
    assert alert.evidence["subject_fingerprint"] == fingerprint
    assert fingerprint in alert.message
    assert "alice" not in alert.message
    assert "strongroom erasure status --all" in alert.message
