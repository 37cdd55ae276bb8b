"""``strongroom erase`` (crypto-shred subjects, get a receipt) and ``strongroom erasure status`` (is it done?).

Exit codes of ``erasure status`` (and of ``erase --wait``): 0 when every subject is verified, 4 when
any is still pending or was never erased; 1 for handled errors as everywhere. With ``--fail-on overdue``
``erasure status`` exits 4 only when an erasure is past the deadline the keys topic's configs promise
(``segment.ms`` / ``max.compaction.lag.ms``): the check a monitoring job runs.
"""

from __future__ import annotations

import time
from typing import Any

import click

from strongroom.cli.common import FiniteFloatRange, client_config, keys_options, progress_to
from strongroom.cli.output import Output
from strongroom.policies import ErasureFailOn
from strongroom.text import table

EXIT_PENDING = 4


@click.command()
@keys_options
@click.argument("subjects", nargs=-1)
@click.option(
    "--from-file",
    "from_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Also erase the subjects in this file: one per line, exactly as written (# comments; a line "
    'starting with " is a JSON string).',
)
@click.option("--reason", required=True, help="Why (recorded with the request, e.g. 'GDPR art. 17 request #4711').")
@click.option("--requested-by", default=None, help="Who asked (default: the OS user running the command).")
@click.option(
    "--wait",
    "wait_seconds",
    type=FiniteFloatRange(0, 7 * 24 * 3600),
    default=None,
    metavar="SECONDS",
    help="Then wait up to SECONDS for the erasure to be verified (exit 4 if still pending).",
)
@click.pass_context
def erase(
    ctx: click.Context, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
    subjects: tuple[str, ...], from_file: str | None, reason: str, requested_by: str | None,
    wait_seconds: float | None,
) -> None:  # fmt: skip
    """Crypto-shred SUBJECTs: write erasure markers, tombstone their keys, print a receipt.

    Erasing a subject that has no keys is not an error: the marker is written so records that arrive
    later follow the post-erasure policy. Running the same erasure again is safe and finishes an
    interrupted one.
    """
    from strongroom.keys.erasure import erase as run_erase
    from strongroom.keys.erasure import read_subjects_file

    out: Output = ctx.obj
    wanted = list(subjects) + (read_subjects_file(from_file) if from_file else [])
    if not wanted:
        raise click.UsageError("name at least one SUBJECT or pass --from-file")
    client = client_config(bootstrap, command_config)
    receipt = run_erase(
        client, wanted, reason=reason, requested_by=requested_by, topic=keys_topic, progress=progress_to(out)
    )
    data: dict[str, Any] = receipt.to_dict()
    verified = True
    if wait_seconds is not None:
        statuses = _wait_verified(out, client, wanted, keys_topic, readers_topic, wait_seconds)
        data["verification"] = [s.to_dict() for s in statuses]
        verified = all(s.status == "verified" for s in statuses)
        data["status"] = "verified" if verified else "pending-verification"
    out.result(data, _render_receipt)
    if not verified:
        ctx.exit(EXIT_PENDING)


def _render_receipt(d: dict[str, Any]) -> str:
    lines = [
        f"erasure request {d['request_id']}  ({d['status']})",
        f"  requested by {d['requested_by']} at {d['requested_at']}: {d['reason']}",
    ]
    rows = [(s["subject"], s["partition"], s["marker_offset"], s["keys_tombstoned"], s["note"]) for s in d["subjects"]]
    lines.append(table(rows, ["subject", "partition", "marker offset", "keys tombstoned", "note"]))
    if d.get("compaction_deadline"):
        lines.append(f"compaction deadline (from the topic configs): {d['compaction_deadline']}")
    for status in d.get("verification", []):
        lines.append(_render_one(status))
    if d["status"] != "verified":
        lines.append(f"check with: {d['verify_with']}")
    return "\n".join(lines)


def _wait_verified(
    out: Output, client: Any, subjects: list[str], keys_topic: str, readers_topic: str, timeout: float
) -> list[Any]:
    from strongroom.keys.verification import erasure_status

    deadline = time.monotonic() + timeout
    while True:
        statuses = erasure_status(client, subjects, topic=keys_topic, readers_topic=readers_topic)
        pending = [s for s in statuses if s.status != "verified"]
        if not pending or time.monotonic() >= deadline:
            return statuses
        out.progress(f"waiting for {len(pending)} erasure(s): {pending[0].reasons[0] if pending[0].reasons else ''}")
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))


@click.group()
def erasure() -> None:
    """Erasure verification."""


@erasure.command()
@keys_options
@click.argument("subjects", nargs=-1)
@click.option("--all", "all_subjects", is_flag=True, help="Every subject that has an erasure marker.")
@click.option(
    "--wait",
    "wait_seconds",
    type=FiniteFloatRange(0, 7 * 24 * 3600),
    default=None,
    metavar="SECONDS",
    help="Poll until verified or SECONDS have passed.",
)
@click.option(
    "--no-nudge",
    is_flag=True,
    help="Never append a no-op record to roll a quiet partition's active segment (read-only check).",
)
@click.option(
    "--fail-on",
    type=click.Choice([p.value for p in ErasureFailOn]),
    default=ErasureFailOn.PENDING.value,
    show_default=True,
    help="Exit 4 when any erasure is not verified yet (pending), or only when one is past the deadline the "
    "keys topic's segment.ms/max.compaction.lag.ms promise (overdue).",
)
@click.pass_context
def status(
    ctx: click.Context, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
    subjects: tuple[str, ...], all_subjects: bool, wait_seconds: float | None, no_nudge: bool, fail_on: str,
) -> None:  # fmt: skip
    """Is the erasure of SUBJECTs finished? ``pending`` with reasons, or ``verified`` with the evidence."""
    from strongroom.keys.verification import erasure_status

    out: Output = ctx.obj
    if bool(subjects) == all_subjects:
        raise click.UsageError("name SUBJECTs or pass --all (not both)")
    client = client_config(bootstrap, command_config)
    wanted = None if all_subjects else list(subjects)
    deadline = time.monotonic() + (wait_seconds or 0)
    while True:
        statuses = erasure_status(client, wanted, topic=keys_topic, readers_topic=readers_topic, nudge=not no_nudge)
        done = all(s.status == "verified" for s in statuses)
        if done or time.monotonic() >= deadline:
            break
        out.progress(f"{sum(s.status != 'verified' for s in statuses)} subject(s) not verified yet")
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
    data = [s.to_dict() for s in statuses]
    out.result(
        data, lambda d: "\n".join([*(_render_one(s) for s in d), _render_scope()]) if d else "no erased subjects"
    )
    failed = any(s.overdue for s in statuses) if ErasureFailOn(fail_on) == ErasureFailOn.OVERDUE else not done
    if failed:
        ctx.exit(EXIT_PENDING)


def _render_scope() -> str:
    """What `verified` checks and what it cannot (also in every status of --output json)."""
    from strongroom.keys.verification import CANNOT_VERIFY, VERIFIES

    lines = ["verified means:", *(f"  + {item}" for item in VERIFIES), "it cannot verify:"]
    return "\n".join([*lines, *(f"  ? {item}" for item in CANNOT_VERIFY)])


def _render_one(s: dict[str, Any]) -> str:
    lines = [f"{s['subject']}: {s['status']}" + (" (OVERDUE)" if s.get("overdue") else "")]
    lines += [f"  - {reason}" for reason in s["reasons"]]
    lines += [f"  ! {warning}" for warning in s["warnings"]]
    if s["status"] == "verified":
        ev = s["evidence"]
        lines.append(
            f"  evidence: partition {ev['partition']} read from offset {ev['scanned_from_offset']} to "
            f"{ev['scanned_to_offset']}: no key record below the marker at {ev['marker_offset']}; "
            f"readers that applied it: {', '.join(ev['readers_applied']) or 'none registered'}"
        )
    return "\n".join(lines)
