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


# ---------------------------------------------------------------------------------------- shared options
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
@spark_master_option
@click.pass_context
def inventory(ctx: click.Context, /, bootstrap: str | None, command_config: str | None, topics: tuple[str, ...],
              source: RecordSourceOptions, question_kek: str | None, no_unwrap_check: bool,
              spark_master: str | None) -> None:  # fmt: skip
    """Report, per topic-partition, the offset ranges that depend on each KEK (and version), with KEK states."""
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
