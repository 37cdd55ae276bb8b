"""``strongroom keys``: the keys topic and its readers — create-topic, show, inventory, readers, rewrap, retire.

``keys_options`` (Kafka options plus the keys and readers topics) is shared with ``cli/erasure.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from strongroom.cli.common import (
    client_config,
    keys_options,
    kms_config_option,
    progress_to,
)
from strongroom.cli.factories import load_kms
from strongroom.cli.output import Output
from strongroom.text import table

F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------- shared options
# ---------------------------------------------------------------------------------------- commands
@click.group()
def keys() -> None:
    """Per-subject keys: the keys topic, its readers, KEK rotation."""


@keys.command("create-topic")
@keys_options
@click.option(
    "--partitions",
    type=click.IntRange(1, 10_000),
    default=12,
    show_default=True,
    help="Partitions (never change it later: subjects are placed by murmur2(subject) % partitions).",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(1, 10),
    default=None,
    help="Default: min(3, brokers); min.insync.replicas is one less (at least 1).",
)
@click.option(
    "--config",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one of the keys-topic configs (repeatable), e.g. segment.ms=600000.",
)
@click.pass_obj
def create_topic(
    out: Output, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
    partitions: int, replication_factor: int | None, overrides: tuple[str, ...],
) -> None:  # fmt: skip
    """Create the keys topic (compacted, bounded compaction) and the key-readers registry."""
    from strongroom.keys.topic import create_keys_topic, create_readers_topic
    from strongroom.keys.topic_config import compaction_blockers, erasure_deadline_ms

    config: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--config {item!r} is not KEY=VALUE")
        config[key.strip()] = value.strip()
    client = client_config(bootstrap, command_config)
    result = create_keys_topic(
        client, keys_topic, partitions=partitions, replication_factor=replication_factor, config_overrides=config
    )
    result["readers_topic_created"] = create_readers_topic(client, readers_topic)
    result["compaction_blockers"] = compaction_blockers(result["config"])
    result["erasure_deadline_seconds"] = erasure_deadline_ms(result["config"]) // 1000

    def render(d: dict[str, Any]) -> str:
        verb = "created" if d["created"] else "already exists (left unchanged)"
        lines = [
            f"keys topic {d['topic']} {verb}: {d['partitions']} partitions",
            f"erasure deadline with these settings: about {d['erasure_deadline_seconds']} s after the tombstones",
        ]
        lines += [f"warning: {reason}" for reason in d["compaction_blockers"]]
        return "\n".join(lines)

    out.result(result, render)


@keys.command()
@keys_options
@click.argument("subjects", nargs=-1, required=True)
@click.pass_obj
def show(out: Output, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
         subjects: tuple[str, ...]) -> None:  # fmt: skip
    """Show a subject's key records and erasure marker (ids and offsets only, never key material)."""
    from strongroom.keys.topic import KeysTopic
    from strongroom.keys.verification import SubjectScan, scan_partitions

    topic = KeysTopic(client_config(bootstrap, command_config), keys_topic)
    scans = scan_partitions(topic, {topic.partition_of(s) for s in subjects}, set(subjects))
    rows = []
    for subject in subjects:
        partition = topic.partition_of(subject)
        seen = scans[partition].subjects.get(subject, SubjectScan())
        marker_at = seen.marker_offset
        keys_out = [
            {
                "key_id": key_id.hex(),
                "offset": rec.offset,
                "erased": rec.tombstoned_at is not None or (marker_at is not None and rec.offset < marker_at),
            }
            for key_id, rec in sorted(seen.keys.items(), key=lambda kv: kv[1].offset)
        ]
        marker = None
        if marker_at is not None and seen.marker is not None:
            marker = {"offset": marker_at, "request_id": seen.marker.request_id}
        rows.append({"subject": subject, "partition": partition, "keys": keys_out, "erasure_marker": marker})

    def render(d: list[dict[str, Any]]) -> str:
        lines = []
        for row in d:
            marker = row["erasure_marker"]
            state = f"erased at offset {marker['offset']}" if marker else "not erased"
            lines.append(f"{row['subject']}  partition {row['partition']}  {state}")
            for key in row["keys"]:
                lines.append(f"  key {key['key_id']} @ {key['offset']}{'  (erased)' if key['erased'] else ''}")
            if not row["keys"]:
                lines.append("  no key records in the log")
        return "\n".join(lines)

    out.result(rows, render)


@keys.command()
@keys_options
@click.option(
    "--kek",
    "kek_ref",
    default=None,
    metavar="PROVIDER:KEK-ID",
    help="Only this KEK; with --list-subjects, list the subjects whose keys depend on it.",
)
@click.option("--list-subjects", is_flag=True, help="List the subjects under --kek (can be long).")
@click.pass_obj
def inventory(out: Output, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
              kek_ref: str | None, list_subjects: bool) -> None:  # fmt: skip
    """The chain KEK → wrapping keys → subject keys: what depends on which KEK (no KMS needed)."""
    from strongroom.keys.rewrap import kek_version
    from strongroom.keys.table import KeyTable

    if list_subjects and not kek_ref:
        raise click.UsageError("--list-subjects needs --kek PROVIDER:KEK-ID")
    client = client_config(bootstrap, command_config)
    out.note(f"reading {keys_topic} ...")
    with KeyTable(client, None, topic=keys_topic, register=False, seal_usage=False) as key_table:
        key_table.wait_caught_up(600)
        keks: dict[str, dict[str, Any]] = {}
        counts = key_table.store.keys_per_wrapping_key()
        for wk in key_table.store.wrapping_keys():
            if kek_ref and wk.edek.kek_ref != kek_ref:
                continue
            entry = keks.setdefault(wk.edek.kek_ref, {"wrapping_keys": 0, "subject_keys": 0, "versions": {}})
            entry["wrapping_keys"] += 1
            entry["subject_keys"] += counts.get(wk.wk_id, 0)
            version = kek_version(wk.edek)
            label = "?" if version is None else str(version)
            entry["versions"][label] = entry["versions"].get(label, 0) + 1
        result: dict[str, Any] = {"keys_topic": keys_topic, "keks": keks, **key_table.store.counts()}
        # Validation of the records (docs/shredding.md): key records outside their subject's partition are
        # ignored; lost markers need a KMS to be confirmed, which this command does not use.
        result["misplaced_key_records"] = key_table.stats()["misplaced"]
        result["lost_markers"] = [m.to_dict() for m in key_table.refused_lost_markers().values()]
        if list_subjects and kek_ref:
            result["subjects"] = sorted(key_table.subjects_under_kek(kek_ref))

    def render(d: dict[str, Any]) -> str:
        rows = [
            (
                kek,
                v["wrapping_keys"],
                v["subject_keys"],
                ", ".join(f"v{k}: {n}" for k, n in sorted(v["versions"].items())),
            )
            for kek, v in sorted(d["keks"].items())
        ]
        text = table(rows, ["KEK", "wrapping keys", "subject keys", "KEK versions"]) if rows else "no wrapping keys"
        text += f"\nerasure markers: {d['erasure_markers']}, erased keys: {d['erased_keys']}"
        if d["misplaced_key_records"]:
            misplaced = d["misplaced_key_records"]
            text += f"\nkey records outside their subject's partition (ignored by every reader): {misplaced}"
        if d["lost_markers"]:
            text += (f"\nlost markers: {len(d['lost_markers'])} (readers apply one only when their KMS confirms the "
                     "KEK is gone; `recover scan` with KMS options checks them)")  # fmt: skip
        if "subjects" in d:
            text += "\n" + "\n".join(d["subjects"])
        return text

    out.result(result, render)


@keys.command()
@keys_options
@click.option(
    "--forget",
    "forget_id",
    default=None,
    metavar="READER-ID",
    help="Remove a reader that will never come back (delete its persistent store first).",
)
@click.pass_obj
def readers(out: Output, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
            forget_id: str | None) -> None:  # fmt: skip
    """List the registered key readers (heartbeats), or forget one."""
    from strongroom.keys.readers import forget_reader, read_registry
    from strongroom.keys.topic import KeysTopic
    from strongroom.runtime import now_ms

    client = client_config(bootstrap, command_config)
    if forget_id:
        last = forget_reader(client, forget_id, readers_topic)
        out.result(
            {"forgotten": forget_id, "host": last.host, "persistent": last.persistent, "store": last.store},
            lambda d: f"forgot reader {d['forgotten']} (on {d['host']}; store {d['store']})",
        )
        return
    registry = read_registry(client, readers_topic, keys_topic=keys_topic)
    ends = {p: high for p, (_, high) in KeysTopic(client, keys_topic).watermarks().items()} if registry else {}
    now = now_ms()
    rows = [
        {
            "reader_id": hb.reader_id,
            "host": hb.host,
            "pid": hb.pid,
            "state": hb.state(now),
            "persistent": hb.persistent,
            "store": hb.store,
            "last_seen_seconds_ago": round((now - hb.last_seen_ms) / 1000, 1),
            "lag": sum(max(0, end - hb.applied.get(p, 0)) for p, end in ends.items()),
            "applied": hb.applied,
        }
        for hb in sorted(registry.values(), key=lambda h: h.reader_id)
    ]

    def render(d: list[dict[str, Any]]) -> str:
        if not d:
            return f"no key readers registered for {keys_topic}"
        return table(
            [(r["reader_id"], r["host"], r["state"], "yes" if r["persistent"] else "no", r["last_seen_seconds_ago"],
              r["lag"]) for r in d],
            ["reader", "host", "state", "persistent", "seen (s ago)", "lag"],
        )  # fmt: skip

    out.result(rows, render)


@keys.command()
@keys_options
@kms_config_option
@click.option(
    "--to-kek",
    "to_kek",
    default=None,
    metavar="ALIAS",
    help="Move every wrapping key to this KEK (default: its own KEK's current version).",
)
@click.option(
    "--kek",
    "only_kek",
    default=None,
    metavar="PROVIDER:KEK-ID",
    help="Rewrap only the wrapping keys under this KEK (as `kek inventory` names it); needed when the KMS "
    "settings name several KMSes (a rules file's kms: section), whose KMS it picks.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be rewrapped; write nothing.")
@click.pass_obj
def rewrap(out: Output, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
           kms_config: str | None, to_kek: str | None, only_kek: str | None, dry_run: bool) -> None:  # fmt: skip
    """Rewrap every wrapping key (or those of --kek) under the current KEK version (or --to-kek); idempotent,
    resumable."""
    from strongroom.keys.errors import RewrapFailed
    from strongroom.keys.rewrap import RewrapReport
    from strongroom.keys.rewrap import rewrap as run_rewrap

    kms = _rewrap_kms(kms_config, only_kek)
    try:
        report: RewrapReport = run_rewrap(
            client_config(bootstrap, command_config), kms, topic=keys_topic, to_kek_alias=to_kek,
            only_kek=only_kek, dry_run=dry_run, progress=progress_to(out),
        )  # fmt: skip
    except RewrapFailed as exc:
        failed: RewrapReport | None = getattr(exc, "report", None)
        if failed is not None:
            out.result(failed.to_dict(), _render_rewrap)
        raise
    finally:
        kms.close()
    out.result(report.to_dict(), _render_rewrap)


@keys.command()
@keys_options
@click.option(
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    metavar="N",
    help="Only this partition of the keys topic (repeatable; default: every partition).",
)
@click.option("--dry-run", is_flag=True, help="Report what would be retired and dropped; write nothing.")
@click.pass_obj
def retire(out: Output, bootstrap: str, command_config: str | None, keys_topic: str, readers_topic: str,
           partitions: tuple[int, ...], dry_run: bool) -> None:  # fmt: skip
    """Drop the seal leases, retiring the subject keys they name (docs/shredding.md, "Leases accumulate"):
    writers move each such subject to a new key at its next record; old records still open."""
    from strongroom.keys.retire import retire as run_retire

    del readers_topic  # (shared option; retiring reads and writes the keys topic only)
    report = run_retire(
        client_config(bootstrap, command_config), topic=keys_topic, partitions=partitions or None, dry_run=dry_run,
        progress=progress_to(out),
    )  # fmt: skip
    out.result(report.to_dict(), _render_retire)


def _render_retire(d: dict[str, Any]) -> str:
    verb = ("would retire", "would drop") if d["dry_run"] else ("retired", "dropped")
    lines = [
        f"{d['keys_topic']}: {verb[0]} {d['keys_retired']} subject keys; {verb[1]} {d['lease_records_dropped']} "
        f"seal-lease records ({d['lease_entries_dropped']} leases)"
    ]
    lines += [
        f"  partition {p['partition']} (below offset {p['end_offset']}): {p['keys_retired']} keys, "
        f"{p['lease_records_dropped']} lease records"
        for p in d["partitions"]
    ]
    if not d["dry_run"] and d["keys_retired"]:
        lines.append(
            "writers make a new key for each of those subjects at its next record; compaction removes the leases"
        )
    return "\n".join(lines)


def _rewrap_kms(kms_config: str | None, only_kek: str | None) -> Any:
    """The KMS that holds the KEK to rewrap: ``--kms-config``'s, or — when it names several KMSes — the one
    ``--kek`` names by provider."""
    from strongroom.errors import ConfigError
    from strongroom.kms.catalog import KmsCatalog
    from strongroom.kms.registry import kms_from_config

    catalog = KmsCatalog.load(kms_config) if kms_config else None
    if not catalog:
        return load_kms(kms_config)
    provider = (only_kek or "").partition(":")[0]
    named = [name for name in catalog.names() if catalog.config(name).get("name", name) == provider]
    if not only_kek or not named:
        raise ConfigError(
            f"--kms-config {kms_config} names several KMSes ({', '.join(catalog.names())}): say which KEK to rewrap",
            hint="pass --kek PROVIDER:KEK-ID as `strongroom kek inventory` names it, e.g. --kek "
            f"{catalog.names()[0]}:<kek-id>",
        )
    return kms_from_config({**catalog.config(named[0]), "cache": False})


def _render_rewrap(d: dict[str, Any]) -> str:
    lines = [
        f"wrapping keys: {d['wrapping_keys']}, rewrapped: {d['rewrapped']}, already current: {d['skipped']}, "
        f"failed: {len(d['failed'])}"
        + (f", under other KEKs (left alone): {d['other_keks']}" if d["other_keks"] else "")
    ]
    for kek, versions in d["versions_after"].items():
        lines.append(f"  {kek}: " + ", ".join(f"v{v}: {n}" for v, n in versions.items()))
    lines += [f"  failed {f['wk_id']}: {f['error']}" for f in d["failed"]]
    lines += [f"retire: {advice}" for advice in d["retire"]]
    return "\n".join(lines)
