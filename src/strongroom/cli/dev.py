"""``strongroom dev up|down|status``: the embedded local stack, by hand."""

from __future__ import annotations

from typing import Any

import click

from strongroom.cli.output import Output


@click.group()
def dev() -> None:
    """Run the embedded local stack (Kafka, OpenBao, local KMS) in the background."""


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
    lines.append(f"  logs                     {d['kafka']['base_dir']}")
    lines.append("Stop it with: strongroom dev down")
    return "\n".join(lines)


@dev.command()
@click.option("--brokers", default=1, show_default=True, type=click.IntRange(1, 5), help="Kafka brokers.")
@click.option("--with-moto", is_flag=True, help="Also start a moto server for the AWS KMS API.")
@click.pass_obj
def up(out: Output, brokers: int, with_moto: bool) -> None:
    """Start the stack and return; prints the addresses (``--output json`` for scripts)."""
    from strongroom.testing import devstack

    out.note("starting Kafka and OpenBao (first start fetches Kafka from Maven Central) ...")
    state = devstack.up(brokers=brokers, with_moto=with_moto)
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
