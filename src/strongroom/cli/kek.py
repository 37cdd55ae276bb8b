"""``strongroom kek``: which records depend on which KEK, and is it safe to delete one.

The Kafka, record-format and KMS options defined here are shared with ``strongroom recover``.

\b
Exit codes of `kek inventory`:
  0  inventory written (with --kek: no scanned record needs that KEK — safe to delete as far as scanned)
  1  handled error (Kafka or KMS unreachable, bad option, unknown topic)
  2  usage error
  3  internal error (a bug in strongroom)
  4  with --kek: records still need that KEK (not safe to delete)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from strongroom.cli.common import client_config, kafka_options, load_kms_config
from strongroom.cli.output import Output, table
from strongroom.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_SAFE = 4
KMS_CHOICES = ["none", "local", "vault", "aws", "inmemory"]


# ---------------------------------------------------------------------------------------- shared options
def format_and_kms_options(fn: F) -> F:
    options = [
        click.option("--format", "record_format", type=click.Choice(["strongroom", "kroxylicious"]),
                     default="strongroom", show_default=True,
                     help="Who encrypted the records: strongroom, or the Kroxylicious record-encryption filter."),
        click.option("--kms", "kms_kind", type=click.Choice(KMS_CHOICES), default=None,
                     help="The KMS holding the KEKs (Kroxylicious records do not say which KMS wrote them)."),
        click.option("--kms-config", envvar="STRONGROOM_KMS_CONFIG", type=click.Path(exists=True, dir_okay=False),
                     default=None, help="KMS settings for kms_from_config, JSON or YAML (env STRONGROOM_KMS_CONFIG); "
                     "overrides the options below."),
        click.option("--kms-name", default=None,
                     help="The provider name in the records' KEK references (default: the --kms kind)."),
        click.option("--vault-address", envvar=["STRONGROOM_VAULT_ADDRESS", "VAULT_ADDR"], default=None,
                     help="Vault/OpenBao address (env STRONGROOM_VAULT_ADDRESS or VAULT_ADDR). Token: env "
                          "STRONGROOM_VAULT_TOKEN or VAULT_TOKEN, or --vault-token-file."),
        click.option("--vault-token-file", type=click.Path(exists=True, dir_okay=False), default=None),
        click.option("--vault-mount", default="transit", show_default=True, help="Transit mount path."),
        click.option("--aws-region", default=None),
        click.option("--aws-endpoint-url", default=None),
        click.option("--keyring", type=click.Path(dir_okay=False), default=None,
                     help="Local KMS keyring file (passphrase: env STRONGROOM_LOCAL_KMS_PASSPHRASE)."),
        click.option("--kek-file", type=click.Path(exists=True, dir_okay=False), default=None,
                     help='--kms inmemory: JSON {"<KEK uuid>": "<base64 AES-256 key>"}.'),
        click.option("--keys-topic", default=None,
                     help="strongroom keys topic, to follow per-subject keys to their KEKs (SUBJECT_KEY records)."),
        click.option("--kms-attempts", type=click.IntRange(1, 20), default=5, show_default=True,
                     help="Attempts per KMS call when the KMS is unavailable (exponential backoff with jitter)."),
        click.option("--kms-deadline", type=click.FloatRange(0.1, 600), default=30.0, show_default=True,
                     help="Seconds to keep retrying one KMS call."),
    ]  # fmt: skip
    for option in reversed(options):
        fn = option(fn)
    return fn


def check_format_options(params: dict[str, Any]) -> None:
    """Refuse a format/KMS combination before connecting to anything (Kroxylicious needs vault|aws|inmemory)."""
    from strongroom.recovery.formats import record_format

    kind = params.get("kms_kind")
    if params["record_format"] == "kroxylicious" and not params.get("kms_config"):
        record_format("kroxylicious", kms_kind=None if kind == "none" else kind)


def build_kms(params: dict[str, Any]) -> Any:
    """The KMS for the options (RetryingKms inside; no DEK cache: the checker keeps verdicts only)."""
    from strongroom.kms.registry import kms_from_config

    retry = {"max_attempts": params["kms_attempts"], "deadline_seconds": params["kms_deadline"]}
    if params.get("kms_config"):
        config = load_kms_config(params["kms_config"])
        config.setdefault("cache", False)
        config.setdefault("retry", retry)
        return kms_from_config(config)
    kind = params.get("kms_kind")
    name = params.get("kms_name") or kind
    if kind in (None, "none"):
        return None
    if kind == "inmemory":
        from strongroom.kms.retrying import RetryingKms
        from strongroom.recovery.formats import KroxyliciousInMemoryKms

        if not params.get("kek_file"):
            raise ConfigError("--kms inmemory needs --kek-file", hint='write {"<KEK uuid>": "<base64 key>"}')
        try:
            keks = json.loads(Path(params["kek_file"]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read --kek-file {params['kek_file']!r}: {exc}") from None
        return RetryingKms(KroxyliciousInMemoryKms.from_json(keks, name=name or "inmemory"), **retry)
    settings: dict[str, Any] = {"provider": kind, "name": name, "cache": False, "retry": retry}
    if kind == "vault":
        address = params.get("vault_address")
        if not address:
            raise ConfigError("--kms vault needs --vault-address (or env VAULT_ADDR)")
        token = os.environ.get("STRONGROOM_VAULT_TOKEN") or os.environ.get("VAULT_TOKEN")
        if params.get("vault_token_file"):
            token = Path(params["vault_token_file"]).read_text(encoding="utf-8").strip()
        if not token:
            raise ConfigError(
                "--kms vault needs a token",
                hint="set STRONGROOM_VAULT_TOKEN (or VAULT_TOKEN) or pass --vault-token-file",
            )
        settings.update(address=address, token=token, mount_path=params["vault_mount"])
    elif kind == "aws":
        if params.get("aws_region"):
            settings["region"] = params["aws_region"]
        if params.get("aws_endpoint_url"):
            settings["endpoint_url"] = params["aws_endpoint_url"]
    elif kind == "local":
        if not params.get("keyring"):
            raise ConfigError("--kms local needs --keyring PATH")
        settings["path"] = params["keyring"]
        passphrase = os.environ.get("STRONGROOM_LOCAL_KMS_PASSPHRASE")
        if passphrase:
            settings["passphrase"] = passphrase
    return kms_from_config(settings)


def open_key_chain(params: dict[str, Any], config: Any, kms: Any) -> Any:
    """The keys table (read-only, unregistered) when --keys-topic is given: subject key → wrapping key → KEK."""
    if not params.get("keys_topic"):
        return None
    from strongroom.keys.table import KeyTable

    table = KeyTable(config, kms, topic=params["keys_topic"], register=False)
    try:
        table.wait_caught_up(120.0)
    except BaseException:
        table.close()
        raise
    return table


def build_format(params: dict[str, Any], kms: Any) -> Any:
    from strongroom.recovery.formats import record_format

    return record_format(
        params["record_format"],
        kms_kind=_kms_kind(params, kms),
        provider_name=kms.name if kms is not None else params.get("kms_name"),
    )


def _kms_kind(params: dict[str, Any], kms: Any) -> str | None:
    """The KMS kind from --kms, or from the provider --kms-config built."""
    kind: str | None = params.get("kms_kind")
    if kind not in (None, "none") or kms is None:
        return None if kind == "none" else kind
    inner = kms.unwrapped() if hasattr(kms, "unwrapped") else kms
    kinds = {"VaultKms": "vault", "AwsKms": "aws", "LocalKms": "local", "KroxyliciousInMemoryKms": "inmemory"}
    return kinds.get(type(inner).__name__)


def spark_session(master: str | None) -> Any:
    from strongroom.spark.session import build_spark_session

    return build_spark_session(master, app_name="strongroom-recovery")


def progress_printer(out: Output) -> Callable[[str, int | None, int | None], None]:
    def progress(message: str, done: int | None, total: int | None) -> None:
        # Phase changes (no counts) always show; counted steps are rate-limited.
        out.progress(message, done=done, total=total, force=done is None)

    return progress


# ---------------------------------------------------------------------------------------- commands
@click.group()
def kek() -> None:
    """KEK inventory: which records depend on which KEK, and whether one can be deleted."""


@kek.command(epilog=__doc__.split("\n\n", 2)[-1] if __doc__ else None)
@kafka_options
@click.option("--topic", "topics", multiple=True, required=True, help="Topic to scan (repeatable).")
@format_and_kms_options
@click.option(
    "--kek",
    "question_kek",
    default=None,
    metavar="KEK",
    help="Answer 'is it safe to delete this KEK?' (a KEK reference like vault:orders-kek, or its id).",
)
@click.option("--no-unwrap-check", is_flag=True, help="Do not check that each KEK version unwraps now.")
@click.option("--spark-master", default=None, help="Spark master (default local[2] or $STRONGROOM_SPARK_MASTER).")
@click.pass_context
def inventory(ctx: click.Context, /, **params: Any) -> None:
    """Report, per topic-partition, the offset ranges that depend on each KEK (and version), with KEK states."""
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.inventory import InventoryOptions, run_inventory
    from strongroom.recovery.kafka_io import ClusterView
    from strongroom.recovery.spark_jobs import kafka_source_options

    out: Output = ctx.obj
    check_format_options(params)
    config = client_config(params["bootstrap"], params["command_config"])
    kms = build_kms(params)
    fmt = build_format(params, kms)
    chain = open_key_chain(params, config, kms)
    checker = AvailabilityChecker(fmt, kms, subject_keys=chain)
    view = ClusterView(config)
    options = InventoryOptions(
        topics=params["topics"], check_unwrap=not params["no_unwrap_check"], question_kek=params["question_kek"]
    )
    try:
        spark = spark_session(params["spark_master"])
        report = run_inventory(
            spark, view, kafka_source_options(config), checker, options,
            has_kms=kms is not None, progress=progress_printer(out),
        )  # fmt: skip
    finally:
        if chain is not None:
            chain.close()
        if kms is not None:
            kms.close()
    out.result(report, render_inventory)
    question = report.get("question")
    if question is not None and not question["safe_to_delete"]:
        ctx.exit(EXIT_NOT_SAFE)


def render_inventory(report: dict[str, Any]) -> str:
    lines = [f"cluster {report['cluster_id']} · format {report['record_format']['format']}", ""]
    rows = []
    for topic in report["topics"]:
        for partition in topic["partitions"]:
            if not partition["dependencies"]:
                rows.append([f"{topic['topic']}-{partition['partition']}", "(empty)", "", "", "", ""])
            for dep in partition["dependencies"]:
                ranges = ", ".join(f"{a}-{b}" for a, b, _ in dep["ranges"][:4])
                more = f" (+{dep['runs'] - 4} more)" if dep["runs"] > 4 else ""
                rows.append(
                    [f"{topic['topic']}-{partition['partition']}", dep["label"], dep["records"], dep["first"],
                     dep["last"], ranges + more]
                )  # fmt: skip
    lines.append(table(rows, ["partition", "depends on", "records", "first", "last", "ranges"]))
    if report["keks"]:
        lines += ["", "KEKs:"]
        kek_rows = []
        for entry in report["keks"]:
            versions = ", ".join(
                f"{v}: {info['records']}" + ("" if info["unwrappable"] in (None, True) else " (NOT unwrappable)")
                for v, info in sorted(entry["versions"].items())
            )
            kek_rows.append([entry["kek"], entry["state"], entry["records"], versions])
        lines.append(table(kek_rows, ["KEK", "state", "records", "versions"]))
    question = report.get("question")
    if question is not None:
        lines.append("")
        if question["safe_to_delete"]:
            lines.append(f"Is it safe to delete {question['kek']}? YES — no scanned record depends on it.")
        else:
            where = ", ".join(
                f"{e['topic']}-{e['partition']} ({e['records']} records, offsets {e['first']}-{e['last']})"
                for e in question["evidence"]
            )
            lines.append(
                f"Is it safe to delete {question['kek']}? NO — {question['records_needing_it']} record(s) still need "
                f"it: {where}"
            )
        lines.append("Caveats: " + " ".join(question["caveats"]))
    return "\n".join(lines)
