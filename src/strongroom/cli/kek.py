"""``strongroom kek``: make a local KEK; which records depend on which KEK, and is it safe to delete one.

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

import shlex
from collections.abc import Callable
from typing import Any, TypeVar

import click

from strongroom.cli.common import (
    RecordSourceOptions,
    client_config,
    format_and_kms_options,
    kafka_options,
    progress_to,
    spark_master_option,
    spark_session,
)
from strongroom.cli.factories import build_format, build_kms, check_format_options, open_key_chain
from strongroom.cli.output import Output
from strongroom.recovery.render import render_inventory

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_SAFE = 4
#: The KEK alias the pipelines use unless told otherwise (``strongroom encrypt --kek-alias``).
DEFAULT_KEK_ALIAS = "strongroom-subjects"


# ---------------------------------------------------------------------------------------- shared options
# ---------------------------------------------------------------------------------------- commands
@click.group()
def kek() -> None:
    """KEKs: make one in a local keyring; which records depend on which KEK, and whether one can be deleted."""


@kek.command()
@click.option(
    "--local-kms",
    "keyring",
    required=True,
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="The local development keyring file (created, mode 0600, if it does not exist). Passphrase: env "
    "STRONGROOM_LOCAL_KMS_PASSPHRASE (without one, only the file mode protects the KEKs).",
)
@click.option(
    "--kek-alias",
    default=DEFAULT_KEK_ALIAS,
    show_default=True,
    metavar="NAME",
    help="The alias pipelines name the KEK by (strongroom encrypt --kek-alias).",
)
@click.pass_obj
def create(out: Output, keyring: str, kek_alias: str) -> None:
    """Create a KEK in a local keyring file, creating the file on first use (development only: the KEKs
    live in a file next to the data). An alias that already names a KEK is refused, never replaced."""
    from pathlib import Path

    from strongroom.kms.admin.local import LocalKekAdmin
    from strongroom.kms.local import LocalKms

    new_file = not Path(keyring).exists()
    kms = LocalKms.from_config({"path": keyring, "create": True})
    try:
        kek_id = LocalKekAdmin(kms).create_kek(kek_alias)
    finally:
        kms.close()
    data = {"keyring": keyring, "new_keyring": new_file, "kek_alias": kek_alias, "kek": f"{kms.name}:{kek_id}"}
    out.result(data, _render_created)


def _render_created(d: dict[str, Any]) -> str:
    where = "new keyring" if d["new_keyring"] else "keyring"
    keyring, alias = shlex.quote(d["keyring"]), shlex.quote(d["kek_alias"])
    return (
        f"created KEK {d['kek_alias']!r} ({d['kek']}) in {where} {d['keyring']} (mode 0600)\n"
        f"use it: `strongroom encrypt --local-kms {keyring} --kek-alias {alias} "
        "--bootstrap-server HOST:PORT --topic TOPIC`"
    )


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
@spark_master_option
@click.pass_context
def inventory(ctx: click.Context, /, bootstrap: str | None, command_config: str | None, topics: tuple[str, ...],
              source: RecordSourceOptions, question_kek: str | None, no_unwrap_check: bool,
              spark_master: str | None) -> None:  # fmt: skip
    """Report, per topic-partition, the offset ranges that depend on each KEK (and version), with KEK states."""
    from strongroom.kafka.topics import require_topics
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.inventory import InventoryOptions, run_inventory
    from strongroom.recovery.kafka_io import ClusterView
    from strongroom.recovery.spark_jobs import kafka_source_options

    out: Output = ctx.obj
    check_format_options(source)
    config = client_config(bootstrap, command_config)
    kms = build_kms(source)
    fmt = build_format(source, kms)
    chain = open_key_chain(source, config, kms)
    checker = AvailabilityChecker(fmt, kms, subject_keys=chain)
    view = ClusterView(config)
    options = InventoryOptions(topics=topics, check_unwrap=not no_unwrap_check, question_kek=question_kek)
    try:
        require_topics(config, topics)
        spark = spark_session(spark_master, "strongroom-recovery")
        report = run_inventory(
            spark, view, kafka_source_options(config), checker, options,
            has_kms=kms is not None, progress=progress_to(out),
        )  # fmt: skip
    finally:
        if chain is not None:
            chain.close()
        if kms is not None:
            kms.close()
    out.result(report.to_json(), lambda _data: render_inventory(report))
    if report.question is not None and not report.question.safe_to_delete:
        ctx.exit(EXIT_NOT_SAFE)
