"""``strongroom encrypt`` and ``strongroom decrypt``: run the Spark pipelines.

Both run on the session :func:`~strongroom.spark.session.build_spark_session` builds (``local[2]`` by
default, ``--spark-master`` or ``spark-submit`` for a cluster). Without ``--continuous`` they process
what the topics hold now and stop; with it they keep running until interrupted. Restarting with the
same ``--checkpoint`` (and ``--app-id``) resumes exactly where the last run stopped, without
duplicates in Kafka output.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from strongroom.cli.common import (
    JAVA_LONG_MAX,
    FiniteFloatRange,
    client_config,
    default_state_dir,
    grouped,
    kafka_options,
    kms_config_option,
    load_kms_config,
    parse_pairs,
    spark_options,
    spark_session,
)
from strongroom.cli.output import Output
from strongroom.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from strongroom.kms.catalog import KmsCatalog
    from strongroom.metrics import MetricsServer
    from strongroom.rules import EncryptionRules
    from strongroom.schemas.registry import RegistrySettings
    from strongroom.spark.jobs.common import PipelineSettings, StreamingJob
    from strongroom.spark.jobs.results import PipelineResult


@dataclass(frozen=True)
class RuleOptions:
    """``--rules FILE``, or one rule for every ``--topic`` from the shorthand options."""

    rules_file: str | None
    topics: tuple[str, ...]
    subject: str
    fields: str | None
    aad_profile: str

    def rules(self, *, output_topic: str | None = None, on_reject: str | None = None) -> EncryptionRules:
        from strongroom.rules import EncryptionRules

        if self.rules_file and self.topics:
            raise ConfigError("pass either --rules or --topic, not both", hint="put every topic in the rules file")
        if self.rules_file:
            return EncryptionRules.load(self.rules_file)
        if not self.topics:
            raise click.UsageError("name the topics with --topic (repeatable) or give a --rules file")
        source, _, where = self.subject.partition(":")
        subject_cfg: dict[str, Any] = {"source": source}
        if source == "header":
            subject_cfg["header"] = where
        elif source == "json":
            subject_cfg["path"] = where
        rule: dict[str, Any] = {"subject": subject_cfg, "aad_profile": self.aad_profile}
        if self.fields:
            rule["mode"] = "fields"
            rule["fields"] = [f.strip() for f in self.fields.split(",") if f.strip()]
        if output_topic:
            rule["output_topic"] = output_topic
        if on_reject:
            rule["on_reject"] = on_reject
        return EncryptionRules.single(self.topics, **rule)

    def kms_catalog(self) -> KmsCatalog:
        """The named KMSes of the rules file's ``kms:`` section (none without a rules file)."""
        from strongroom.kms.catalog import KmsCatalog

        return KmsCatalog.load(self.rules_file) if self.rules_file else KmsCatalog()


rule_options = grouped(
    "rule_options",
    RuleOptions,
    [
        click.option(
            "--rules",
            "rules_file",
            type=click.Path(exists=True, dir_okay=False),
            default=None,
            help="Per-topic rules, JSON or YAML (see docs/pipelines.md). Or use --topic and the options below.",
        ),
        click.option(
            "--topic", "topics", multiple=True, help="Topic to process (repeatable), all with the options below."
        ),
        click.option(
            "--subject",
            default="key",
            show_default=True,
            metavar="key|header:NAME|json:$.PATH",
            help="Where the data subject comes from.",
        ),
        click.option(
            "--fields",
            default=None,
            metavar="$.a,$.b",
            help="Encrypt these JSON fields only (field mode); default: the whole value.",
        ),
        click.option(
            "--aad-profile",
            type=click.Choice(["topic", "portable"]),
            default="topic",
            show_default=True,
            help="Bind ciphertext to topic+subject (topic) or to the subject only (portable, for mirrors).",
        ),
    ],
)


@dataclass(frozen=True)
class PipelineOptions:
    """What every pipeline command takes besides its rules: where Kafka, the KMS and the checkpoint are,
    how it runs, and on which Spark."""

    bootstrap: str | None
    command_config: str | None
    kms_config: str | None
    local_kms: str | None
    keys_topic: str
    checkpoint: str | None
    app_id: str | None
    dead_letter_topic: str | None
    starting_offsets: str
    continuous: bool
    trigger_seconds: float
    max_offsets_per_trigger: int | None
    on_input_gap: str
    allow_unencrypted_spark_channel: bool
    engine: str
    schema_registry: str | None
    spark_master: str | None
    spark_conf: tuple[str, ...]
    metrics_port: int | None
    metrics_host: str

    def settings(self, kind: str, rules: EncryptionRules, catalog: KmsCatalog | None = None) -> PipelineSettings:
        """PipelineSettings from the options every pipeline command shares; ``catalog``: the rules file's KMSes."""
        from strongroom.policies import Engine
        from strongroom.spark.jobs.common import InputGapPolicy, PipelineSettings

        client = client_config(self.bootstrap, self.command_config)
        return PipelineSettings(
            bootstrap_servers=client.bootstrap_servers,
            rules=rules,
            kms=self.kms(rules, catalog, sealing=kind == "encrypt"),
            kmses=self.kmses(catalog),
            checkpoint=self.checkpoint or default_state_dir("checkpoints", f"{kind}-{self.app_id or 'default'}"),
            app_id=self.app_id,
            client_properties=dict(client.extra or {}),
            keys_topic=self.keys_topic,
            dead_letter_topic=self.dead_letter_topic,
            starting_offsets="latest" if self.starting_offsets == "latest" else "earliest",
            max_offsets_per_trigger=self.max_offsets_per_trigger,
            trigger_seconds=self.trigger_seconds if self.continuous else None,
            on_input_gap=InputGapPolicy(self.on_input_gap),
            allow_unencrypted_spark_channel=self.allow_unencrypted_spark_channel,
            engine=Engine(self.engine),
            schema_registry=registry_settings(self.schema_registry),
        )

    def kmses(self, catalog: KmsCatalog | None) -> dict[str, dict[str, Any]]:
        """The rules file's named KMS settings; metered too with ``--metrics-port``."""
        configs = catalog.configs() if catalog else {}
        if self.metrics_port is not None:
            for config in configs.values():
                config.setdefault("metrics", True)
        return configs

    def kms(self, rules: EncryptionRules, catalog: KmsCatalog | None, *, sealing: bool = True) -> dict[str, Any]:
        """The command's KMS config; with ``--metrics-port`` its calls are metered (``strongroom_kms_*``).

        Empty when the rules file's ``kms:`` section covers the command: for a writer, when every rule names
        one of its KMSes; for a reader, always (each wrapping key names the KMS that unwraps it)."""
        covered = catalog and (not sealing or all(r.kms for r in rules.rules))
        if self.kms_config is None and self.local_kms is None and covered:
            return {}
        config = dict(load_kms_config(self.kms_config, local_keyring=self.local_kms))
        if self.metrics_port is not None:
            config.setdefault("metrics", True)
        return config


#: How long a pipeline waits out an unreachable schema registry (as a KMS outage) before it stops.
REGISTRY_OUTAGE_WAIT_S = 1800.0


def registry_settings(url: str | None) -> RegistrySettings | None:
    """The pipeline's schema registry: ``url`` and credentials from the environment (never from argv)."""
    if url is None:
        return None
    from pydantic import ValidationError

    from strongroom.schemas.registry import RegistrySettings
    from strongroom.text import problem_list

    env = {
        field: os.environ[name]
        for field, name in (
            ("username", "STRONGROOM_SCHEMA_REGISTRY_USER"),
            ("password", "STRONGROOM_SCHEMA_REGISTRY_PASSWORD"),
            ("bearer_token", "STRONGROOM_SCHEMA_REGISTRY_TOKEN"),
        )
        if os.environ.get(name)
    }
    try:
        return RegistrySettings.model_validate({"url": url, "outage_wait_s": REGISTRY_OUTAGE_WAIT_S, **env})
    except ValidationError as exc:
        raise ConfigError(
            f"invalid --schema-registry: {problem_list(exc.errors(include_input=False, include_url=False))}",
            hint="give the registry's http(s)://host[:port][/path]; credentials in STRONGROOM_SCHEMA_REGISTRY_*",
        ) from None


pipeline_options = grouped(
    "options",
    PipelineOptions,
    [
        kafka_options,
        kms_config_option,
        click.option(
            "--local-kms",
            default=None,
            metavar="PATH",
            help="Use the local development keyring at PATH instead of --kms-config.",
        ),
        click.option("--keys-topic", envvar="STRONGROOM_KEYS_TOPIC", default="strongroom-keys", show_default=True),
        click.option("--checkpoint", default=None, help="Spark checkpoint directory (default under $STRONGROOM_HOME)."),
        click.option("--app-id", default=None, help="Stable pipeline id (transactional ids, offsets group)."),
        click.option("--dead-letter-topic", default=None, help="Where rejected/failed records go, unchanged."),
        click.option(
            "--starting-offsets", type=click.Choice(["earliest", "latest"]), default="earliest", show_default=True
        ),
        click.option("--continuous", is_flag=True, help="Keep running (micro-batches) until interrupted."),
        click.option(
            "--trigger-seconds",
            type=FiniteFloatRange(0.1),
            default=5.0,
            show_default=True,
            help="Micro-batch interval with --continuous.",
        ),
        click.option("--max-offsets-per-trigger", type=click.IntRange(1, JAVA_LONG_MAX), default=None),
        click.option(
            "--on-input-gap",
            type=click.Choice(["report", "fail"]),
            default="report",
            show_default=True,
            help="Input records that aged out before the pipeline read them: count and report them (logged "
            "as an error, in the result), or also stop.",
        ),
        click.option(
            "--allow-unencrypted-spark-channel",
            is_flag=True,
            help="Run on a cluster without spark.authenticate and spark.network.crypto.enabled (the key "
            "service's token then crosses the network in clear; refused by default).",
        ),
        click.option(
            "--engine",
            type=click.Choice(["python", "jvm"]),
            default="jvm",
            show_default=True,
            help="Where the exactly-once Kafka writer runs: Python workers, or the executor JVM (needs the "
            'data-plane jar, `make dataplane`). See docs/pipelines.md, "Engines".',
        ),
        click.option(
            "--schema-registry",
            metavar="URL",
            envvar="STRONGROOM_SCHEMA_REGISTRY_URL",
            default=None,
            help="Confluent-API schema registry for schema-mode rules (Apicurio: .../apis/ccompat/v7). Credentials "
            "come from STRONGROOM_SCHEMA_REGISTRY_USER/_PASSWORD or _TOKEN (docs/schema-aware.md).",
        ),
        spark_options,
        click.option(
            "--metrics-port",
            type=click.IntRange(min=0, max=65535),
            default=None,
            metavar="PORT",
            help="Serve Prometheus metrics on this port while the pipeline runs (0 = any free port; docs/metrics.md).",
        ),
        click.option(
            "--metrics-host", default="127.0.0.1", show_default=True, help="Address for the metrics endpoint."
        ),
    ],
)


#: Reports a job's result after each batch.
OnBatch = Callable[[int, "PipelineResult"], None]


def _run(
    out: Output,
    kind: str,
    options: PipelineOptions,
    rules: EncryptionRules,
    make_job: Callable[[SparkSession, PipelineSettings, OnBatch], StreamingJob[Any]],
    catalog: KmsCatalog | None = None,
) -> None:
    """Build the session and the job, run it (once, or continuously until Ctrl-C), print the result."""
    from strongroom.spark.jobs.common import PIPELINE_SPARK_CONF

    settings = options.settings(kind, rules, catalog)
    _require_input_topics(settings, rules)
    conf = {**PIPELINE_SPARK_CONF, **parse_pairs(options.spark_conf, "--spark-conf")}
    spark = spark_session(options.spark_master, f"strongroom-{kind}", conf)

    def progress(batch_id: int, result: PipelineResult) -> None:
        out.progress(f"batch {batch_id}: {result.written} records written so far", force=True)

    job = make_job(spark, settings, progress)
    result: PipelineResult
    server = _serve_metrics(out, job, options) if options.metrics_port is not None else None
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM stops as gracefully as Ctrl-C
    try:
        if not options.continuous:
            try:
                result = job.run()
            except KeyboardInterrupt:
                out.note("stopped between batches (the next start resumes from the checkpoint)")
                raise SystemExit(130) from None
        else:
            query = job.start()
            out.note(f"running {kind} query {query.name}; stop with Ctrl-C (progress below)")
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                out.note("stopping after the running batch (the next start resumes from the checkpoint) ...")
                job.stop_gracefully(query)
            if job.error is not None:
                raise job.error
            result = job.result()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if server is not None:
            server.close()
        job.close()
    # The CLI edge: the typed result becomes JSON here (the --output json layout users read), text next to it.
    out.result(
        {"pipeline": kind, "checkpoint": settings.checkpoint, **result.to_json()}, lambda _: result.render_text()
    )


def _serve_metrics(out: Output, job: StreamingJob[Any], options: PipelineOptions) -> MetricsServer:
    """``--metrics-port``: the job's metrics on their own registry, served over HTTP while it runs."""
    from prometheus_client import CollectorRegistry

    from strongroom.metrics import MetricsServer

    registry = CollectorRegistry()
    job.attach_metrics(registry)
    server = MetricsServer(registry, options.metrics_port or 0, options.metrics_host)
    out.note(f"metrics on http://{options.metrics_host}:{server.port}/metrics")
    return server


def _require_input_topics(settings: PipelineSettings, rules: EncryptionRules) -> None:
    """The topics the query subscribes to by name exist, checked before Spark starts: a missing one is one
    clear error naming it, not a failed query (a pattern subscription may match no topic yet)."""
    from strongroom.kafka.topics import require_topics

    subscription = rules.subscription()
    if "subscribe" in subscription:
        require_topics(settings.client, subscription["subscribe"].split(","))


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@click.command()
@rule_options
@click.option(
    "--output-topic", default=None, metavar="TEMPLATE", help="Output topic; $(topic) = source ($(topic).enc)."
)
@click.option(
    "--on-reject",
    type=click.Choice(["fail", "dead-letter"]),
    default=None,
    help="Records that cannot be encrypted (no subject, not JSON in field mode, too large).",
)
@click.option("--kek-alias", default="strongroom-subjects", show_default=True, help="KMS KEK for wrapping keys.")
@click.option(
    "--post-erasure",
    type=click.Choice(["unreadable", "drop", "new-key"]),
    default="unreadable",
    show_default=True,
    help="What happens to records of subjects erased earlier.",
)
@pipeline_options
@click.pass_obj
def encrypt(out: Output, /, rule_options: RuleOptions, options: PipelineOptions, kek_alias: str, post_erasure: str,
            output_topic: str | None, on_reject: str | None) -> None:  # fmt: skip
    """Encrypt plaintext topics into encrypted ones with per-subject keys, exactly once (Spark)."""
    from strongroom.spark.jobs.encrypt import EncryptJob

    _run(
        out,
        "encrypt",
        options,
        rule_options.rules(output_topic=output_topic, on_reject=on_reject),
        lambda spark, settings, progress: EncryptJob(
            spark, settings, kek_alias=kek_alias, post_erasure=post_erasure, on_batch=progress
        ),
        rule_options.kms_catalog(),
    )


@click.command()
@rule_options
@click.option(
    "--output",
    "output_kind",
    type=click.Choice(["kafka", "parquet", "console"]),
    default="kafka",
    show_default=True,
    help="Where decrypted records go.",
)
@click.option("--output-path", default=None, help="Directory for --output parquet.")
@click.option(
    "--output-topic",
    default="$(base).decrypted",
    show_default=True,
    metavar="TEMPLATE",
    help="Output topic; $(topic) = source, $(base) = source without .enc.",
)
@click.option(
    "--on-failure",
    type=click.Choice(["fail", "dead-letter", "skip"]),
    default="fail",
    show_default=True,
    help="Records that cannot be decrypted (lost KEK, tampered, unknown version).",
)
@click.option(
    "--erased",
    type=click.Choice(["drop", "mark"]),
    default="drop",
    show_default=True,
    help="Whole-value records of erased subjects: drop, or keep with a null value and a marker header.",
)
@click.option(
    "--lost-kek-wait",
    type=FiniteFloatRange(0),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="With --on-failure fail: keep re-checking a lost/disabled KEK this long before stopping.",
)
@click.option(
    "--topic-map",
    multiple=True,
    metavar="PHYSICAL=LOGICAL",
    help="Read a mirrored topic under the name its records were encrypted for.",
)
@click.option(
    "--max-pending",
    type=click.IntRange(1),
    default=100_000,
    show_default=True,
    help="Records that may wait for their keys at once.",
)
@click.option(
    "--pending-timeout",
    type=FiniteFloatRange(1),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="A record waiting longer for its key goes to the dead-letter topic (or stops the pipeline).",
)
@click.option(
    "--allow-plaintext",
    is_flag=True,
    help="Pass records without the strongroom.enc marker through as they are (default: they fail, like any "
    "record that cannot be decrypted: a plaintext or downgraded record in an encrypted topic).",
)
@pipeline_options
@click.pass_obj
def decrypt(out: Output, /, rule_options: RuleOptions, options: PipelineOptions, output_kind: str,
            output_path: str | None, output_topic: str, on_failure: str, erased: str, lost_kek_wait: float,
            topic_map: tuple[str, ...], max_pending: int, pending_timeout: float,
            allow_plaintext: bool) -> None:  # fmt: skip
    """Decrypt encrypted topics to Kafka (exactly once), Parquet or the console (Spark)."""
    from strongroom.spark.jobs.decrypt import DecryptJob

    mapping = parse_pairs(topic_map, "--topic-map")
    _run(
        out,
        "decrypt",
        options,
        rule_options.rules(),
        lambda spark, settings, progress: DecryptJob(
            spark,
            settings,
            output=output_kind,
            output_path=output_path,
            output_topic=output_topic,
            on_failure=on_failure,
            erased=erased,
            lost_kek_wait_s=lost_kek_wait,
            topic_map=mapping,
            max_pending=max_pending,
            pending_timeout_s=pending_timeout,
            on_batch=progress,
            encrypted_only=not allow_plaintext,
        ),
        rule_options.kms_catalog(),
    )
