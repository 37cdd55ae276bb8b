"""Options and loaders every command group shares: where Kafka is, how to authenticate, which KMS."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from strongroom.cli.output import Output
from strongroom.errors import ConfigError
from strongroom.text import SecretFileError, load_secret_settings

if TYPE_CHECKING:
    from strongroom.kafka.config import ClientConfig

F = TypeVar("F", bound=Callable[..., Any])


#: The largest count a JVM (Spark, the data plane, Kafka's clients) takes: a Java long.
JAVA_LONG_MAX = 2**63 - 1


class FiniteFloatRange(click.FloatRange):
    """A number of seconds (or other float) in a range, and finite: click's own range lets ``nan`` through any
    bounds (no comparison with it is true) and ``inf`` through a range without a maximum."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def apply_options(fn: F, options: list[Callable[[F], F]]) -> F:
    for option in reversed(options):
        fn = option(fn)
    return fn


def grouped(name: str, cls: type[Any], options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """Add ``options`` to a command and hand them to it as one typed object: the keyword ``name`` gets
    ``cls(**those options)`` (a dataclass whose fields are the options' names), so commands take explicit
    typed parameters instead of ``**params``."""
    names = [f.name for f in dataclasses.fields(cls)]

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            group = cls(**{key: kwargs.pop(key) for key in names})
            return fn(*args, **{name: group}, **kwargs)

        return apply_options(cast(F, command), options)

    return decorate


def kafka_options(fn: F) -> F:
    """``--bootstrap-server`` and ``--command-config`` (librdkafka properties for authentication), with one
    meaning for every command: the bootstrap servers may also come from ``bootstrap.servers`` in the
    properties file or ``$STRONGROOM_BOOTSTRAP_SERVERS`` (see :func:`client_config`)."""
    return apply_options(
        fn,
        [
            click.option(
                "--bootstrap-server",
                "-b",
                "bootstrap",
                envvar="STRONGROOM_BOOTSTRAP_SERVERS",
                default=None,
                metavar="HOST:PORT[,...]",
                help="Kafka cluster (env STRONGROOM_BOOTSTRAP_SERVERS, or bootstrap.servers in --command-config).",
            ),
            click.option(
                "--command-config",
                type=click.Path(dir_okay=False),
                default=None,
                metavar="FILE",
                help="librdkafka properties file (security.protocol, sasl.*, ssl.*) for every client.",
            ),
        ],
    )


def client_config(bootstrap: str | None, command_config: str | None) -> ClientConfig:
    """The Kafka client settings of a command: the properties file's, with the bootstrap servers from the
    option (or the file)."""
    from strongroom.kafka.config import ClientConfig
    from strongroom.kafka.properties import read_properties_file

    extra: dict[str, Any] = {}
    if command_config:
        try:
            extra = dict(read_properties_file(command_config))
        except FileNotFoundError:
            raise ConfigError(
                f"client configuration file {command_config!r} does not exist", hint="check the --command-config path"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read client configuration file {command_config!r}: {exc}") from None
    from_file = extra.pop("bootstrap.servers", None)
    bootstrap = bootstrap or from_file
    if not bootstrap:
        raise click.UsageError("--bootstrap-server is required (or bootstrap.servers in --command-config)")
    return ClientConfig(bootstrap, extra=extra or None)


def spark_session(master: str | None, app: str, conf: dict[str, str] | None = None) -> Any:
    """The command's Spark session (the one factory: local[2] unless a master or spark-submit says otherwise)."""
    from strongroom.spark.session import build_spark_session

    return build_spark_session(master, app_name=app, conf=conf)


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
        config = load_secret_settings(path, "--kms-config")
    except SecretFileError as exc:
        raise ConfigError(str(exc), hint=exc.hint) from None
    if not isinstance(config, dict):
        raise ConfigError(f"--kms-config {path} must hold an object (mapping)", hint="see docs/pipelines.md")
    return config


def progress_to(out: Output) -> Callable[[str, int | None, int | None], None]:
    """The one progress printer: phase changes (no counts) always show, counted steps are rate-limited."""

    def report(message: str, done: int | None, total: int | None) -> None:
        out.progress(message, done=done, total=total, force=done is None)

    return report


def spark_master_option(fn: F) -> F:
    """``--spark-master`` (env ``STRONGROOM_SPARK_MASTER``; default ``local[2]``; spark-submit's wins)."""
    return click.option(
        "--spark-master",
        envvar="STRONGROOM_SPARK_MASTER",
        default=None,
        metavar="URL",
        help="Spark master URL (default local[2]; env STRONGROOM_SPARK_MASTER; under spark-submit the submitted one).",
    )(fn)


def spark_options(fn: F) -> F:
    """``--spark-master`` and repeatable ``--spark-conf key=value``."""
    return apply_options(
        fn,
        [
            spark_master_option,
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


KMS_CHOICES = ["none", "local", "vault", "aws", "inmemory"]


@dataclass(frozen=True)
class RecordSourceOptions:
    """Who encrypted the records and which KMS holds their KEKs (``kek`` and ``recover`` commands)."""

    record_format: str
    kms_kind: str | None
    kms_config: str | None
    kms_name: str | None
    vault_address: str | None
    vault_token_file: str | None
    vault_mount: str
    aws_region: str | None
    aws_endpoint_url: str | None
    keyring: str | None
    kek_file: str | None
    keys_topic: str | None
    kms_attempts: int
    kms_deadline: float


def format_and_kms_options(fn: F) -> F:
    """The record format and KMS options, handed to the command as ``source: RecordSourceOptions``.

    The Kafka options are separate (:func:`kafka_options`)."""
    options: list[Callable[[F], F]] = [
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
        click.option("--kms-deadline", type=FiniteFloatRange(0.1, 600), default=30.0, show_default=True,
                     help="Seconds to keep retrying one KMS call."),
    ]  # fmt: skip
    return grouped("source", RecordSourceOptions, options)(fn)


def keys_options(fn: F) -> F:
    """``--bootstrap-server``, ``--command-config``, ``--keys-topic``, ``--readers-topic``."""
    return apply_options(
        fn,
        [
            kafka_options,
            click.option("--keys-topic", envvar="STRONGROOM_KEYS_TOPIC", default="strongroom-keys", show_default=True,
                         help="The keys topic (env STRONGROOM_KEYS_TOPIC)."),
            click.option("--readers-topic", default="strongroom-key-readers", show_default=True,
                         help="The key-readers registry topic."),
        ],
    )  # fmt: skip
