"""mark-lost without a cluster: which plans it refuses, how it judges each wrapping key, how the scan sees
keys already declared lost. The KMS is the real local one; the keys-topic side is tested in integration."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from recovery_records import local_kms, subject_key_record

from strongroom.cli.main import main
from strongroom.keys.lost import WrappingKeyState
from strongroom.keys.records import LostMarker, WrappingKeyRecord
from strongroom.keys.store import StoredLost
from strongroom.kms.api import Edek, KekState
from strongroom.recovery.checker import AvailabilityChecker
from strongroom.recovery.dependency import KeyStatus
from strongroom.recovery.errors import ApplyRefused, PlanInvalid, PlanRejected
from strongroom.recovery.formats import StrongroomFormat
from strongroom.recovery.mark_lost import Candidate, _judge_against_kms, _judge_against_topic, candidates_of
from strongroom.recovery.plan import RecoveryPlan, RemedyKind, seal_plan, write_plan
from strongroom.recovery.scan import remedy

WK_A = "aa" * 16
WK_B = "bb" * 16
PLAN_ID = "sha256:" + "12" * 32


def plan_document(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "format": "strongroom-recovery-plan/1",
        "cluster_id": "c1",
        "topic": "orders",
        "verified": True,
        "assumed_lost": [],
        "keys_topic": "strongroom-keys",
        "keks": [
            {"kek": "vault:kek-a", "state": "missing", "lost": True, "lost_records": 100},
            {"kek": "vault:kek-b", "state": "enabled", "lost": False, "lost_records": 0},
        ],
        "partitions": [],
        "lost_wrapping_keys": [
            {"wrapping_key": WK_A, "kek": "vault:kek-a", "subject_keys": 10, "records": 100, "partitions": [0]}
        ],
        "remedy": {"kind": "scattered", "steps": ["the remedy"]},
    }
    base.update(changes)
    return base


def plan(**changes: Any) -> RecoveryPlan:
    return RecoveryPlan.from_document(seal_plan(plan_document(**changes)))


def test_candidates_of_a_scattered_plan() -> None:
    [candidate] = candidates_of(plan())
    assert (candidate.wk_id.hex(), candidate.kek, candidate.kek_state) == (WK_A, "vault:kek-a", "missing")
    assert (candidate.subject_keys, candidate.records, candidate.status) == (10, 100, "would mark")


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"verified": False}, ApplyRefused, "unverified"),
        ({"lost_wrapping_keys": None}, PlanInvalid, "older strongroom"),
        ({"keys_topic": None}, PlanInvalid, "keys topic"),
        ({"lost_wrapping_keys": []}, ApplyRefused, "no per-subject-key loss"),
        ({"lost_wrapping_keys": [{"wrapping_key": "zz", "kek": "vault:kek-a"}]}, PlanInvalid, "not hex"),
    ],
)
def test_plans_the_remedy_does_not_fit_are_refused(changes: dict[str, Any], error: type, match: str) -> None:
    changed = plan_document(**changes)
    if changes.get("lost_wrapping_keys", 0) is None:
        del changed["lost_wrapping_keys"]
    with pytest.raises(error, match=match):
        candidates_of(RecoveryPlan.from_document(seal_plan(changed)))


def test_a_kek_only_assumed_lost_is_refused() -> None:
    what_if = plan(
        assumed_lost=["vault:kek-b"],
        lost_wrapping_keys=[{"wrapping_key": WK_B, "kek": "vault:kek-b", "subject_keys": 3, "records": 9}],
    )
    with pytest.raises(
        PlanRejected, match=r"vault:kek-b \(enabled\) are not lost .*assumed lost with --kek: vault:kek-b"
    ):
        candidates_of(what_if)
    unknown = plan(keks=[{"kek": "vault:kek-a", "state": "unknown: KMS unavailable", "lost": True}])
    with pytest.raises(PlanRejected, match="unknown: KMS unavailable"):
        candidates_of(unknown)


@pytest.mark.parametrize("state", ["missing", "pending_deletion", "disabled"])
def test_every_lost_state_may_be_marked(state: str) -> None:
    [candidate] = candidates_of(plan(keks=[{"kek": "vault:kek-a", "state": state, "lost": True}]))
    assert candidate.kek_state == state


def test_a_missing_wrapping_key_record_may_be_marked() -> None:
    [candidate] = candidates_of(plan(lost_wrapping_keys=[{"wrapping_key": WK_B, "kek": None, "subject_keys": 1}]))
    assert candidate.kek_state == "wrapping-key record missing"


def _candidate(kek: str | None = "vault:kek-a") -> Candidate:
    return Candidate(bytes.fromhex(WK_A), kek, "missing", 10, 100)


def _wk(kek_id: str = "kek-a") -> WrappingKeyRecord:
    return WrappingKeyRecord(bytes.fromhex(WK_A), Edek("vault", kek_id, b"vault:v1:x"), 1)


@pytest.mark.parametrize(
    ("state", "kek", "status"),
    [
        (WrappingKeyState(bytes.fromhex(WK_A), 0, _wk()), "vault:kek-a", "would mark"),
        (WrappingKeyState(bytes.fromhex(WK_A), 0, _wk("kek-new")), "vault:kek-a", "skipped: rewrapped since the scan"),
        (
            WrappingKeyState(bytes.fromhex(WK_A), 0, None),
            "vault:kek-a",
            "skipped: its wrapping-key record is no longer",
        ),
        (WrappingKeyState(bytes.fromhex(WK_A), 0, None), None, "would mark"),
        (WrappingKeyState(bytes.fromhex(WK_A), 0, _wk()), None, "skipped: its wrapping-key record is back"),
        (
            WrappingKeyState(
                bytes.fromhex(WK_A), 0, _wk(), LostMarker(bytes.fromhex(WK_A), "k", "r", PLAN_ID, "d", 1), 7
            ),
            "vault:kek-a",
            f"already declared lost by plan {PLAN_ID}",
        ),
    ],
)
def test_the_keys_topic_decides_what_is_still_lost(state: WrappingKeyState, kek: str | None, status: str) -> None:
    candidate = _candidate(kek)
    _judge_against_topic(candidate, state)
    assert candidate.status.startswith(status)


def test_the_kms_confirms_or_clears_each_wrapping_key(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    gone, back, off = admin.create_kek("gone"), admin.create_kek("back"), admin.create_kek("off")
    wk_ids = [bytes([i]) * 16 for i in range(3)]
    edeks = [kms.wrap(kek, b"\x05" * 32) for kek in (gone, back, off)]
    admin.delete_kek(gone)
    admin.set_state(off, KekState.DISABLED)
    candidates = [Candidate(w, e.kek_ref, "missing", 1, 1) for w, e in zip(wk_ids, edeks, strict=True)]
    states = {w: WrappingKeyState(w, 0, WrappingKeyRecord(w, e, 1)) for w, e in zip(wk_ids, edeks, strict=True)}
    _judge_against_kms(kms, candidates, states)
    assert [c.status for c in candidates] == [
        "would mark",
        "skipped: its KEK unwraps it again (restored since the scan)",
        "would mark",
    ]
    assert candidates[0].note.startswith("confirmed by the KMS")


def test_an_unreachable_kms_refuses_instead_of_guessing() -> None:
    from strongroom.kms.vault import VaultKms

    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kms = VaultKms.from_config({"address": f"http://127.0.0.1:{port}", "token": "t", "timeout_seconds": 1})
    w = bytes(16)
    candidates = [Candidate(w, "vault:kek-a", "missing", 1, 1)]
    states = {w: WrappingKeyState(w, 0, WrappingKeyRecord(w, Edek("vault", "kek-a", b"vault:v1:x"), 1))}
    with pytest.raises(ApplyRefused, match="could not re-check"):
        _judge_against_kms(kms, candidates, states)
    assert candidates[0].status == "would mark"


# ------------------------------------------------------------------------------------------ the scan's view
class Link(NamedTuple):
    key_id: bytes
    subject: str
    wk_id: bytes
    edek: Edek | None
    lost: StoredLost | None = None


class DictChain:
    def __init__(self, links: dict[bytes, Link]) -> None:
        self.links = links

    def chain_of(self, key_ids: Any) -> dict[bytes, Link]:
        wanted = set(key_ids)
        return {k: v for k, v in self.links.items() if k in wanted}


def test_declared_lost_keys_are_handled_without_a_kms_call(tmp_path: Path) -> None:
    from strongroom.kms.metered import MeteredKms

    kms, admin = local_kms(tmp_path)
    kek_a, kek_b = admin.create_kek("a"), admin.create_kek("b")
    wk_a, wk_b = kms.wrap(kek_a, b"\x01" * 32), kms.wrap(kek_b, b"\x02" * 32)
    admin.delete_kek(kek_a)
    marker = StoredLost(b"A" * 16, 0, 3, f"local:{kek_a}", "gone", PLAN_ID, "ops", 1)
    links = {
        b"\x01" * 16: Link(b"\x01" * 16, "s1", b"A" * 16, wk_a, marker),
        b"\x02" * 16: Link(b"\x02" * 16, "s2", b"B" * 16, wk_b),
    }
    metered = MeteredKms(kms)
    checker = AvailabilityChecker(StrongroomFormat(), metered, subject_keys=DictChain(links))
    lost = checker.check_record(*subject_key_record(b"\x01" * 16, b"\x09" * 32, b"s1"))
    fine = checker.check_record(*subject_key_record(b"\x02" * 16, b"\x09" * 32, b"s2"))
    assert lost.readable
    assert not lost.lost
    assert lost.verdicts[0].status is KeyStatus.DECLARED_LOST
    assert f"declared lost by plan {PLAN_ID}" in lost.verdicts[0].reason
    assert fine.verdicts[0].status is KeyStatus.READABLE
    assert metered.snapshot()["calls"] == 1  # only wrapping key B was unwrapped
    assert checker.declared_lost == {(b"A" * 16).hex(): (f"local:{kek_a}", PLAN_ID)}


def test_the_remedy_names_declared_lost_keys_and_their_undo() -> None:
    declared = {
        "subject_keys": 10,
        "records": 100,
        "wrapping_keys": [{"wrapping_key": WK_A, "kek": "vault:kek-a", "plan_id": PLAN_ID, "subject_keys": 10,
                           "records": 100}],
    }  # fmt: skip
    partitions = [{"partition": 0, "shape": "intact"}]
    result = remedy({"verified": True, "keks": [], "partitions": partitions, "declared_lost": declared})
    assert result.kind == RemedyKind.NONE
    assert f"unmark-lost --wk {WK_A}" in result.steps[0]
    scattered = remedy(
        {"verified": True, "keks": [], "partitions": [{"partition": 0, "shape": "scattered"}],
         "lost_subject_keys": {"count": 10}, "lost_wrapping_keys": [{"wrapping_key": WK_A}]}
    )  # fmt: skip
    assert scattered.kind == RemedyKind.SCATTERED
    assert "recover mark-lost --plan" in scattered.steps[0]
    assert "keys rewrap" in scattered.steps[0]


# ------------------------------------------------------------------------------------------ CLI, no server
def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_mark_lost_refuses_an_old_plan_before_connecting(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    old = plan_document()
    del old["lost_wrapping_keys"]
    path = tmp_path / "plan.json"
    write_plan(seal_plan(old), path)
    code, _, err = run(capsys, "recover", "mark-lost", "-b", "127.0.0.1:1", "--plan", str(path))
    assert code == 1
    assert "older strongroom" in err
    assert "Traceback" not in err


def test_mark_lost_refuses_an_edited_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    write_plan(seal_plan(plan_document()), path)
    edited = json.loads(path.read_text())
    edited["lost_wrapping_keys"][0]["wrapping_key"] = WK_B
    path.write_text(json.dumps(edited))
    code, _, err = run(capsys, "recover", "mark-lost", "-b", "127.0.0.1:1", "--plan", str(path), "--execute")
    assert code == 1
    assert "modified after the scan" in err


def test_mark_lost_is_for_strongroom_records(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    write_plan(seal_plan(plan_document()), path)
    code, _, err = run(
        capsys, "recover", "mark-lost", "-b", "127.0.0.1:1", "--plan", str(path), "--format", "kroxylicious"
    )
    assert code == 2
    assert "per-subject keys" in err


def test_unmark_lost_needs_wrapping_key_ids(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "recover", "unmark-lost", "-b", "127.0.0.1:1", "--wk", "not-hex")
    assert code == 2
    assert "is not a wrapping key id (32 hex digits)" in err
    code, _, err = run(capsys, "recover", "unmark-lost", "-b", "127.0.0.1:1")
    assert code == 2
    assert "--wk" in err


def test_help_documents_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "recover", "mark-lost", "--help")
    assert code == 0
    assert "--execute" in out
    assert "unmark-lost" in out


def test_the_typed_reports_keep_the_json_layout() -> None:
    from strongroom.keys.lost import LostMarkerWrite, LostReceipt
    from strongroom.recovery.mark_lost import LostEntry, LostReport, _written

    marked = LostReport("mark-lost", "keys", (LostEntry.of(_candidate()),), topic="orders", plan_id="sha256:ab",
                        kms_checked=True)  # fmt: skip
    receipt = LostReceipt("mark-lost", "keys", "sha256:ab", "gone", "ops", 1, [LostMarkerWrite(WK_A, 2, 7, True)])
    done = replace(marked, executed=True, wrapping_keys=_written(marked.wrapping_keys, receipt, "marked"),
                   operation_id="op-1", verified={WK_A: 7})  # fmt: skip
    assert list(done.to_json().items()) == [
        ("action", "mark-lost"), ("topic", "orders"), ("keys_topic", "keys"), ("plan_id", "sha256:ab"),
        ("executed", True), ("kms_checked", True),
        ("wrapping_keys", [{"wrapping_key": WK_A, "kek": "vault:kek-a", "kek_state": "missing", "subject_keys": 10,
                            "records": 100, "status": "marked", "note": "", "partition": 2, "offset": 7}]),
        ("operation_id", "op-1"), ("verified", {WK_A: 7}),
    ]  # fmt: skip
    undo = LostReport("unmark-lost", "keys", (LostEntry(WK_A, None, "would unmark", plan_id="p", declared_by="ops"),),
                      note="dry run")  # fmt: skip
    assert list(undo.to_json().items()) == [
        ("action", "unmark-lost"), ("keys_topic", "keys"), ("executed", False),
        ("wrapping_keys", [{"wrapping_key": WK_A, "kek": None, "status": "would unmark", "plan_id": "p",
                            "declared_by": "ops"}]),
        ("note", "dry run"),
    ]  # fmt: skip
