"""``strongroom doctor``: check a Kafka cluster, its topics, and client configurations.

Exit codes: 0 nothing at or above --fail-on; 1 doctor could not run (cluster unreachable,
authentication failed, unreadable file); 2 usage error; 3 internal error; 4 findings at or above
--fail-on (default: error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from strongroom.cli.common import FiniteFloatRange
from strongroom.cli.output import Output
from strongroom.text import table

_SEVERITIES = ["info", "warning", "error", "critical"]

_EXIT_CODES = (
    "\b\nExit codes:\n"
    "  0  nothing at or above --fail-on\n"
    "  1  doctor could not run (cluster unreachable, authentication failed, unreadable file)\n"
    "  2  usage error\n"
    "  3  internal error (a bug in strongroom)\n"
    "  4  findings at or above --fail-on"
)


F = TypeVar("F", bound=Callable[..., Any])


def _fail_on_option() -> Callable[[F], F]:
    return click.option(
        "--fail-on", type=click.Choice(_SEVERITIES), default="error", show_default=True,
        help="Exit 4 when a finding has this severity or higher.",
    )  # fmt: skip


def _rule_options(fn: F) -> F:
    fn = click.option(
        "--skip-rule", "skip_rules", multiple=True, metavar="ID", help="Do not run this rule (repeatable)."
    )(fn)
    fn = click.option("--rule", "only_rules", multiple=True, metavar="ID", help="Run only this rule (repeatable).")(fn)
    return fn


def _finish(ctx: click.Context, out: Output, report: Any) -> None:
    out.result(report.to_dict(), lambda _data: report.render_text())
    if report.exit_code:
        ctx.exit(report.exit_code)


@click.group(invoke_without_command=True, epilog=_EXIT_CODES)
@click.option(
    "--bootstrap-server",
    "-b",
    "bootstrap",
    envvar="STRONGROOM_BOOTSTRAP_SERVERS",
    metavar="HOST:PORT[,...]",
    help="Kafka to check (or bootstrap.servers in --command-config; env STRONGROOM_BOOTSTRAP_SERVERS).",
)
@click.option(
    "--command-config",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="librdkafka properties for the admin client: security.protocol, sasl.*, ssl.*.",
)
@click.option(
    "--topic", "topics", multiple=True, metavar="PATTERN", help="Only check topics matching this glob (repeatable)."
)
@click.option(
    "--keys-topic",
    "keys_topics",
    multiple=True,
    metavar="NAME",
    help="A strongroom keys topic (repeatable). Default: strongroom-keys and any topic ending in -strongroom-keys.",
)
@click.option(
    "--max-partitions-per-broker", type=int, metavar="N", help="Partition replicas per broker limit [default: 4000]."
)
@click.option(
    "--broker-type",
    metavar="TYPE",
    help="Use Amazon MSK's recommended limit for this broker size (e.g. kafka.m5.large).",
)
@click.option(
    "--timeout", type=FiniteFloatRange(min=1), default=15.0, show_default=True, help="Seconds per admin request."
)
@_fail_on_option()
@_rule_options
@click.pass_context
def doctor(
    ctx: click.Context,
    bootstrap: str | None,
    command_config: str | None,
    topics: tuple[str, ...],
    keys_topics: tuple[str, ...],
    max_partitions_per_broker: int | None,
    broker_type: str | None,
    timeout: float,
    fail_on: str,
    only_rules: tuple[str, ...],
    skip_rules: tuple[str, ...],
) -> None:
    """Check a Kafka cluster's brokers, topics and configs against operations guidance.

    Reads brokers, partitions (leaders, replicas, ISR) and effective configs through the admin API and
    runs every rule (list them with 'strongroom doctor rules'). Each finding names the evidence, the
    fix (an exact kafka-configs / kafka-reassign-partitions command) and why it matters.

    Subcommands: 'client' lints a librdkafka client configuration; 'rules' lists the rules.
    """
    if ctx.invoked_subcommand is not None:
        return
    from strongroom.doctor import ClusterCheckSettings, Severity, check_cluster
    from strongroom.doctor.errors import ClientConfigFileError, CommandConfigError
    from strongroom.doctor.limits import partition_limit
    from strongroom.doctor.remediation import KafkaTools
    from strongroom.doctor.run import read_client_properties
    from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT

    out: Output = ctx.obj
    properties: dict[str, str] = {}
    if command_config:
        try:
            properties = read_client_properties(command_config)
        except ClientConfigFileError as exc:
            raise CommandConfigError(exc.problem, hint="check the --command-config path") from None
    bootstrap = bootstrap or properties.pop("bootstrap.servers", None)
    properties.pop("bootstrap.servers", None)
    if not bootstrap:
        raise click.UsageError("--bootstrap-server is required (or bootstrap.servers in --command-config)")
    settings = ClusterCheckSettings(
        tools=KafkaTools(bootstrap, command_config),
        keys_topics=tuple(keys_topics) or (KEYS_TOPIC_DEFAULT,),
        keys_topics_explicit=bool(keys_topics),
        partition_limit=partition_limit(per_broker=max_partitions_per_broker, broker_type=broker_type),
    )
    report = check_cluster(
        bootstrap,
        properties=properties,
        command_config=command_config,
        topic_patterns=topics,
        settings=settings,
        only=only_rules,
        skip=skip_rules,
        fail_on=Severity.parse(fail_on),
        timeout=timeout,
        progress=lambda message: out.progress(message, force=True),
    )
    _finish(ctx, out, report)


@doctor.command(epilog=_EXIT_CODES)
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="librdkafka / confluent-kafka properties file (key=value).")  # fmt: skip
@click.option(
    "--role",
    type=click.Choice(["auto", "producer", "consumer", "both"]),
    default="auto",
    show_default=True,
    help="Which client the file configures; auto decides from producer- and consumer-only properties.",
)
@_fail_on_option()
@_rule_options
@click.pass_context
def client(
    ctx: click.Context,
    config_path: str,
    role: str,
    fail_on: str,
    only_rules: tuple[str, ...],
    skip_rules: tuple[str, ...],
) -> None:
    """Lint a librdkafka client configuration (acks, idempotence, timeouts, backoff, metadata recovery).

    Every property name and value is validated by the installed librdkafka; misspelled names get the
    right one suggested and Java-client names their librdkafka equivalent. Values are compared with
    the resilient defaults strongroom uses itself, each with the operational reason.
    """
    from strongroom.doctor import Severity, check_client
    from strongroom.doctor.run import read_client_properties

    properties = read_client_properties(config_path)
    report = check_client(
        properties, source=config_path, role=role, only=only_rules, skip=skip_rules, fail_on=Severity.parse(fail_on)
    )
    _finish(ctx, ctx.obj, report)


@doctor.command()
@click.pass_obj
def rules(out: Output) -> None:
    """List every doctor rule: id, severity, what it checks and why."""
    from strongroom.doctor import CLIENT_RULES, CLUSTER_RULES

    data = {
        "cluster": [r.describe() for r in CLUSTER_RULES],
        "client": [r.describe() for r in CLIENT_RULES],
    }

    def render(d: dict[str, list[dict[str, str]]]) -> str:
        parts = []
        for kind in ("cluster", "client"):
            rows = [[r["id"], r["severity"], r["title"]] for r in d[kind]]
            parts.append(f"{kind} rules\n" + table(rows, ["id", "max severity", "checks"]))
        return "\n\n".join(parts)

    out.result(data, render)
