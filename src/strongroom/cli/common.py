"""Options and loaders every command group shares: where Kafka is, how to authenticate, which KMS."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from strongroom.cli.output import Output
from strongroom.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def apply_options(fn: F, options: list[Callable[[F], F]]) -> F:
    for option in reversed(options):
        fn = option(fn)
    return fn


def kafka_options(fn: F) -> F:
    """``--bootstrap-server`` and ``--command-config`` (librdkafka properties for authentication)."""
    return apply_options(
        fn,
        [
            click.option(
                "--bootstrap-server",
                "-b",
                "bootstrap",
                envvar="STRONGROOM_BOOTSTRAP_SERVERS",
                required=True,
                metavar="HOST:PORT[,...]",
                help="Kafka cluster (env STRONGROOM_BOOTSTRAP_SERVERS).",
            ),
            click.option(
                "--command-config",
                type=click.Path(exists=True, dir_okay=False),
                default=None,
                help="librdkafka properties file (security.protocol, sasl.*, ssl.*) for every client.",
            ),
        ],
    )


def client_config(bootstrap: str, command_config: str | None) -> Any:
    from strongroom.kafka.config import ClientConfig, read_properties_file

    extra = read_properties_file(command_config) if command_config else None
    return ClientConfig(bootstrap, extra=extra)


def kms_config_option(fn: F) -> F:
    return click.option(
        "--kms-config",
        envvar="STRONGROOM_KMS_CONFIG",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help='KMS settings, JSON or YAML (e.g. {"provider": "vault", "address": "...", "token": "..."}; '
        "tokens may come from STRONGROOM_VAULT_TOKEN). Env STRONGROOM_KMS_CONFIG.",
    )(fn)


def load_kms_config(path: str | None, *, local_keyring: str | None = None) -> dict[str, Any]:
    """The ``kms_from_config`` dict from ``--kms-config`` (JSON/YAML), or a local keyring path."""
    if path is None and local_keyring:
        return {"provider": "local", "path": local_keyring}
    if path is None:
        raise ConfigError(
            "this command needs the KMS that holds the KEKs",
            hint="pass --kms-config FILE (JSON or YAML with 'provider': local|vault|aws) or set STRONGROOM_KMS_CONFIG",
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
        config = _parse_secret_file(text, yaml_syntax=path.endswith((".yaml", ".yml")))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot parse --kms-config {path}: {exc}", hint="fix the file's syntax") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--kms-config {path} must hold an object (mapping)", hint="see docs/pipelines.md")
    return config


def _parse_secret_file(text: str, *, yaml_syntax: bool) -> Any:
    """Parse a file that holds secrets (a Vault token): a syntax error names the line and column and
    what is wrong, never the text around it, which parsers like to quote and which may be the secret."""
    if not yaml_syntax:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{exc.problem or exc.context or 'invalid YAML'}{where}") from None
    except yaml.YAMLError:
        raise ValueError("invalid YAML") from None


def progress_to(out: Output) -> Callable[[str, int, int], None]:
    def report(message: str, done: int, total: int) -> None:
        out.progress(message, done=done, total=total)

    return report


def spark_options(fn: F) -> F:
    """``--spark-master`` and repeatable ``--spark-conf key=value``."""
    return apply_options(
        fn,
        [
            click.option(
                "--spark-master",
                envvar="STRONGROOM_SPARK_MASTER",
                default=None,
                help="Spark master URL (default local[2]; under spark-submit the submitted one).",
            ),
            click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark configuration."),
        ],
    )


def parse_pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option} {pair!r} is not KEY=VALUE", hint=f"write {option} key=value")
        result[key.strip()] = value.strip()
    return result


def default_state_dir(*parts: str) -> str:
    from strongroom.paths import home_dir

    return str(home_dir().joinpath(*parts))
