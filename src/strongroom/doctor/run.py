"""Doctor's entry points: check a cluster, check a client configuration, check a snapshot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from strongroom.doctor.client_config import check_client_config
from strongroom.doctor.client_rules import CLIENT_RULES
from strongroom.doctor.cluster_rules import CLUSTER_RULES, ClusterCheckSettings
from strongroom.doctor.collect import Progress, collect_snapshot
from strongroom.doctor.errors import ClientConfigFileError, CommandConfigError
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.report import DoctorReport
from strongroom.doctor.snapshot import ClusterSnapshot
from strongroom.kafka.properties import PropertiesFileError, read_properties_file


def check_snapshot(
    snapshot: ClusterSnapshot,
    settings: ClusterCheckSettings | None = None,
    *,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    fail_on: Severity = Severity.ERROR,
) -> DoctorReport:
    """Run the cluster rules over an already collected snapshot (no I/O)."""
    settings = settings or ClusterCheckSettings()
    rules = CLUSTER_RULES.select(only, skip)
    findings: list[Finding] = CLUSTER_RULES.run(snapshot, settings, rules)
    target = {
        "bootstrap_servers": snapshot.bootstrap_servers,
        "cluster_id": snapshot.cluster_id,
        "controller": snapshot.controller_id,
        "brokers": snapshot.broker_ids,
        "topics_total": len(snapshot.topics),
        "topics_checked": len(snapshot.checked),
        "keys_topics": sorted(t for t in snapshot.checked if settings.is_keys_topic(t)),
        "partition_limit": {
            "per_broker": settings.partition_limit.per_broker,
            "source": settings.partition_limit.source,
        },
    }
    return DoctorReport("cluster", target, rules, findings, fail_on, list(snapshot.notes))


def check_cluster(
    bootstrap_servers: str,
    *,
    properties: Mapping[str, str] | None = None,
    command_config: str | None = None,
    topic_patterns: Sequence[str] = (),
    settings: ClusterCheckSettings | None = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    fail_on: Severity = Severity.ERROR,
    timeout: float = 15.0,
    progress: Progress | None = None,
) -> DoctorReport:
    """Collect a snapshot of the cluster and run the cluster rules over it."""
    if properties:
        _validate_command_config(properties, command_config)
    CLUSTER_RULES.select(only, skip)  # reject unknown rule ids before touching the network
    snapshot = collect_snapshot(
        bootstrap_servers,
        properties=properties,
        command_config=command_config,
        topic_patterns=topic_patterns,
        timeout=timeout,
        progress=progress,
    )
    return check_snapshot(snapshot, settings, only=only, skip=skip, fail_on=fail_on)


def _validate_command_config(properties: Mapping[str, str], path: str | None) -> None:
    """An unknown property in --command-config stops the run with the right name suggested."""
    view = check_client_config(properties, source=path or "--command-config", role="both")
    bad = [p for p in view.problems if p.kind in ("unknown", "java-only", "invalid")]
    if not bad:
        return
    problem = bad[0]
    where = path or "--command-config"
    if problem.kind == "unknown":
        suggestion = f"did you mean {problem.suggestions[0]!r}?" if problem.suggestions else "remove it"
        raise CommandConfigError(f"{where}: no such librdkafka property {problem.written!r}", hint=suggestion)
    if problem.kind == "java-only" and problem.java is not None:
        use = f"use {problem.java.equivalent}" if problem.java.equivalent else problem.java.note
        raise CommandConfigError(f"{where}: {problem.written!r} is a Java-client property", hint=use)
    raise CommandConfigError(f"{where}: {problem.message}")


def read_client_properties(path: str) -> dict[str, str]:
    try:
        return read_properties_file(path)
    except FileNotFoundError:
        raise ClientConfigFileError(f"client configuration file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientConfigFileError(f"cannot read client configuration file {path!r}: {exc}") from None
    except PropertiesFileError as exc:
        raise ClientConfigFileError(exc.problem, hint=exc.hint) from None


def check_client(
    properties: Mapping[str, str],
    *,
    source: str,
    role: str = "auto",
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    fail_on: Severity = Severity.ERROR,
) -> DoctorReport:
    """Lint librdkafka client properties (as read from a properties file)."""
    rules = CLIENT_RULES.select(only, skip)
    view = check_client_config(properties, source=source, role=role)
    findings = CLIENT_RULES.run(view, None, rules)
    target: dict[str, Any] = {
        "config": source,
        "roles": sorted(view.roles),
        "role_reason": view.role_reason,
        "librdkafka": view.catalogue.version if view.catalogue is not None else None,
        "properties": len(properties),
    }
    notes = [] if view.catalogue is not None else ["librdkafka's property catalogue was not readable: no suggestions"]
    return DoctorReport("client", target, rules, findings, fail_on, notes)
