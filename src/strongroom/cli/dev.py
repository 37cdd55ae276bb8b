"""``strongroom dev up|down|status|create-topic``: the embedded local stack, by hand."""

from __future__ import annotations

from typing import Any

import click

from strongroom.cli.common import kafka_options
from strongroom.cli.output import Output


@click.group()
def dev() -> None:
    """Run the embedded local stack (Kafka, OpenBao, schema registry, local KMS) in the background."""


def _render_up(d: dict[str, Any]) -> str:
    lines = [
        "strongroom dev stack is up",
        f"  Kafka bootstrap servers  {d['bootstrap_servers']}",
        f"  OpenBao (Vault Transit)  {d['openbao']['address']}  (token file {d['openbao']['token_file']})",
        f"  local KMS keyring        {d['local_kms_path']}",
    ]
    for name, path in d.get("kms_configs", {}).items():
        lines.append(f"  --kms-config ({name:5})    {path}   (KEK 'strongroom-subjects', keys topic 'strongroom-keys')")
    if d.get("moto"):
        lines.append(f"  AWS KMS API (moto)       {d['moto']['endpoint_url']}")
    if d.get("schema_registry_url"):
        lines.append(f"  schema registry          {d['schema_registry_url']}  (Apicurio, Confluent API; in memory)")
    lines.append(f"  logs                     {d['kafka']['base_dir']}")
    lines.append("Stop it with: strongroom dev down")
    return "\n".join(lines)


@dev.command()
@click.option("--brokers", default=1, show_default=True, type=click.IntRange(1, 5), help="Kafka brokers.")
@click.option("--with-moto", is_flag=True, help="Also start a moto server for the AWS KMS API.")
@click.option(
    "--registry/--no-registry",
    default=True,
    show_default=True,
    help="Start an Apicurio schema registry (Java 21+; fetched from Maven Central on first use).",
)
@click.pass_obj
def up(out: Output, brokers: int, with_moto: bool, registry: bool) -> None:
    """Start the stack and return; prints the addresses (``--output json`` for scripts)."""
    from strongroom.testing import devstack

    what = "Kafka, OpenBao and the schema registry" if registry else "Kafka and OpenBao"
    out.note(f"starting {what} (the first start fetches them from Maven Central) ...")
    state = devstack.up(brokers=brokers, with_moto=with_moto, with_registry=registry)
    out.result(state.to_json(), _render_up)


@dev.command()
@click.pass_obj
def down(out: Output) -> None:
    """Stop the stack started by ``dev up`` (Kafka data is discarded; KEKs persist)."""
    from strongroom.testing import devstack

    result = devstack.down()
    out.result(result, lambda d: d["message"])


@dev.command()
@click.pass_obj
def status(out: Output) -> None:
    """Show whether the stack is running and where."""
    from strongroom.testing import devstack

    result = devstack.status()
    out.result(
        result,
        lambda d: _render_up(d) if d.get("running") else d.get("message", "the dev stack is not running"),
    )


@dev.command("create-topic")
@kafka_options
@click.argument("topics", nargs=-1, required=True, metavar="TOPIC...")
@click.option("--partitions", type=click.IntRange(1, 10_000), default=3, show_default=True)
@click.option(
    "--replication-factor",
    type=click.IntRange(1, 32),
    default=None,
    help="Replicas per partition [default: the broker's default.replication.factor].",
)
@click.pass_obj
def create_topic(out: Output, bootstrap: str | None, command_config: str | None, topics: tuple[str, ...],
                 partitions: int, replication_factor: int | None) -> None:  # fmt: skip
    """Create topics (the dev stack's broker does not create one when a producer writes to it). Without
    --bootstrap-server, on the running dev stack. An existing topic is left as it is."""
    from strongroom.cli.common import client_config
    from strongroom.kafka.topics import create_topics
    from strongroom.testing import devstack

    if bootstrap is None and command_config is None:
        state = devstack.load_state()
        bootstrap = state.bootstrap_servers if state is not None and devstack.is_running(state) else None
    client = client_config(bootstrap, command_config)
    outcome = create_topics(client, topics, partitions=partitions, replication_factor=replication_factor or -1)
    data = {"bootstrap_servers": client.bootstrap_servers, "partitions": partitions, "topics": outcome}
    out.result(data, lambda d: "\n".join(f"{status} topic {t!r}" for t, status in d["topics"].items()))
