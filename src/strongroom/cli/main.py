"""The ``strongroom`` command: global options, command groups, and one-line errors.

Handled errors (every :class:`~strongroom.errors.StrongroomError`) print ``error: <problem>
(<next step>)`` on stderr and exit 1. Usage errors exit 2 (click's convention). Anything unexpected
prints one line naming the exception type and exits 3; ``--verbose`` shows the traceback.
Command groups register themselves in :data:`COMMAND_MODULES` and are imported lazily, so
``strongroom version`` does not pay for importing Spark.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import signal
import sys
from typing import Any

import click

from strongroom import __version__
from strongroom.cli.output import FORMATS, Output
from strongroom.errors import StrongroomError
from strongroom.text import is_utf8_text

#: command name -> "module:attribute" of a click command or group, imported on first use.
COMMAND_MODULES: dict[str, str] = {
    "dev": "strongroom.cli.dev:dev",
    "demo": "strongroom.cli.demo:demo",
    "doctor": "strongroom.cli.doctor:doctor",
    "audit": "strongroom.cli.audit:audit",
    "kek": "strongroom.cli.kek:kek",
    "recover": "strongroom.cli.recover:recover",
    "keys": "strongroom.cli.keys:keys",
    "erase": "strongroom.cli.erasure:erase",
    "erasure": "strongroom.cli.erasure:erasure",
    "encrypt": "strongroom.cli.pipelines:encrypt",
    "decrypt": "strongroom.cli.pipelines:decrypt",
}


def _available(target: str) -> bool:
    return importlib.util.find_spec(target.split(":")[0]) is not None


EXIT_HANDLED = 1
EXIT_UNEXPECTED = 3


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = {name for name, target in COMMAND_MODULES.items() if _available(target)}
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMAND_MODULES and _available(COMMAND_MODULES[cmd_name]):
            module_name, attr = COMMAND_MODULES[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--output", "-o", "output_format", type=click.Choice(sorted(FORMATS)), default="text",
    show_default=True, help="Result format on stdout. Progress and notes go to stderr.",
)  # fmt: skip
@click.option("--verbose", "-v", is_flag=True, help="Log details and show tracebacks of unexpected errors.")
@click.version_option(__version__, "--version", prog_name="strongroom")
@click.pass_context
def cli(ctx: click.Context, output_format: str, verbose: bool) -> None:
    """strongroom keeps the data you store in Apache Kafka safe.

    Envelope encryption with per-subject keys, GDPR crypto-shredding with proof, lost-KEK recovery,
    durability audit, and configuration doctor.
    """
    ctx.obj = FORMATS[output_format]()
    ctx.meta["verbose"] = verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@cli.command()
@click.pass_obj
def version(out: Output) -> None:
    """Print strongroom's version and those of the components it drives."""
    from strongroom.testing.kafka_dist import KAFKA_VERSION

    data: dict[str, Any] = {"strongroom": __version__, "kafka": KAFKA_VERSION}
    for dist in ("pyspark", "confluent-kafka", "cryptography"):
        try:
            from importlib.metadata import version as dist_version

            data[dist] = dist_version(dist)
        except Exception:  # noqa: BLE001 - a missing optional dist is just reported as absent
            data[dist] = None
    out.result(data, lambda d: "\n".join(f"{k:16} {v}" for k, v in d.items()))


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # runs atexit hooks: servers the command started are stopped


#: The environment variables strongroom reads start with these (tokens, addresses, bootstrap servers).
_OWN_ENVIRONMENT = ("STRONGROOM_", "VAULT_", "AWS_")


def _require_text(args: list[str]) -> None:
    """Refuse an argument, or a variable of strongroom's environment, that is not UTF-8 text. Python hands such
    bytes over as lone surrogates, which would be stored (a subject, a reason in the operations log) or fail deep
    inside a command or a client library. Named by its place or name, never shown: it may be a secret."""
    for name, value in os.environ.items():
        if name.startswith(_OWN_ENVIRONMENT) and not is_utf8_text(value):
            raise click.UsageError(f"environment variable {name} is not valid UTF-8 text")
    for place, arg in enumerate(args, start=1):
        if not is_utf8_text(arg):
            option = args[place - 2] if place > 1 else ""
            before = f" (after {option!r})" if option.startswith("-") and "=" not in option else ""
            raise click.UsageError(
                f"argument {place}{before} is not valid UTF-8 text: strongroom reads its arguments as UTF-8 "
                "(check the terminal's encoding, or the script that built the command line)"
            )


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the CLI and turn errors into one line and an exit code."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = sys.argv[1:] if argv is None else argv
    verbose = "-v" in args or "--verbose" in args
    try:
        _require_text(args)
        # Without standalone mode click returns ctx.exit(code)'s code instead of raising it.
        code = cli.main(args=argv, prog_name="strongroom", standalone_mode=False)
    except StrongroomError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_HANDLED
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_HANDLED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as exc:
        if verbose:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        click.echo(
            f"internal error: {type(exc).__name__}: {first[:300]} "
            "(this is a bug in strongroom; rerun with --verbose and report the traceback)",
            err=True,
        )
        return EXIT_UNEXPECTED
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


if __name__ == "__main__":
    raise SystemExit(main())
