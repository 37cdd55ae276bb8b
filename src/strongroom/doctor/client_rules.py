"""Client configuration rules: librdkafka properties against the operations guidance.

The recommended values are the ones strongroom itself uses (``strongroom.kafka.config``), so the
advice and our own clients cannot drift apart. Each finding names the recommended value, where the
current value comes from (the file or librdkafka's default), and the operational reason, quoting the
MSK operations guide where it says it best.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from strongroom.doctor.client_config import ClientConfigView, render_value
from strongroom.doctor.model import Finding, Rule, RuleRegistry, Severity

ClientRule = Rule[ClientConfigView, None]

#: Every client rule, in the order doctor runs them.
CLIENT_RULES: RuleRegistry[ClientConfigView, None] = RuleRegistry("client")

_LONGER_OUTAGES = (
    "'Default configurations often prove insufficient for MSK's cloud environment, where cross-AZ latency, "
    "authentication overhead, and maintenance operations create longer interruption periods than typical "
    "on-premise deployments' (MSK operations guide)."
)
_RETRY_GUIDANCE = (
    "'MSK environments require more aggressive retry configurations than typical Kafka deployments due to longer "
    "recovery times during maintenance operations and cross-AZ network latency' (MSK operations guide)."
)


def _property_finding(
    rule: ClientRule,
    view: ClientConfigView,
    name: str,
    problem: str,
    *,
    recommended: Any,
    severity: Severity | None = None,
    fix: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Finding:
    value, origin = view.value(name)
    label = view.label(name)
    evidence: dict[str, Any] = {"value": value, "origin": origin, "recommended": render_value(recommended)}
    if view.canonical(name) != label:
        evidence["librdkafka_name"] = view.canonical(name)
    evidence.update(extra or {})
    if not view.is_set(name):
        problem += " (not set: librdkafka's default)"
    return rule.finding(
        "property",
        label,
        problem,
        fix or f"set {label}={render_value(recommended)}",
        evidence=evidence,
        commands=[f"{label}={render_value(recommended)}"],
        severity=severity,
    )


# ---------------------------------------------------------------------------------------- names and values


@CLIENT_RULES.rule(
    "client-unknown-property",
    Severity.CRITICAL,
    "Property librdkafka does not know",
    "librdkafka refuses to create a client with an unknown property ('No such configuration property'): the "
    "application fails at start-up, or - if the key is dropped by a wrapper - the intended setting silently "
    "never applies.",
)
def unknown_property(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for problem in view.problems:
        if problem.kind != "unknown":
            continue
        hint = f"did you mean {' or '.join(problem.suggestions)}?" if problem.suggestions else "no similar name"
        yield rule.finding(
            "property", problem.written, f"no such librdkafka property: {problem.written!r} ({hint})",
            f"rename it to {problem.suggestions[0]}" if problem.suggestions else "remove it or look up the "
            "intended name in librdkafka's CONFIGURATION.md",
            evidence={"librdkafka": problem.message, "suggestions": list(problem.suggestions)},
        )  # fmt: skip


@CLIENT_RULES.rule(
    "client-java-only-property",
    Severity.CRITICAL,
    "Java-client property that librdkafka does not accept",
    "Settings copied from a Java client: librdkafka rejects the name, so a confluent-kafka client fails to start.",
)
def java_only_property(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for problem in view.problems:
        if problem.kind != "java-only" or problem.java is None:
            continue
        use = f"use {problem.java.equivalent}" if problem.java.equivalent else "no librdkafka equivalent"
        yield rule.finding(
            "property", problem.written, f"{problem.written} is a Java-client property ({use}): {problem.java.note}",
            f"{use} instead" if problem.java.equivalent else f"remove it ({problem.java.note})",
            evidence={"librdkafka": problem.message, "equivalent": problem.java.equivalent},
        )  # fmt: skip


@CLIENT_RULES.rule(
    "client-invalid-value",
    Severity.CRITICAL,
    "Value librdkafka rejects",
    "librdkafka refuses to create a client with an out-of-range or malformed value.",
)
def invalid_value(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for problem in view.problems:
        if problem.kind == "invalid":
            yield rule.finding(
                "property", problem.written, problem.message, "fix the value (see librdkafka's range in the message)",
                evidence={"librdkafka": problem.message},
            )  # fmt: skip


@CLIENT_RULES.rule(
    "client-config-rejected",
    Severity.CRITICAL,
    "librdkafka refuses the properties together",
    "Each property is valid on its own but librdkafka refuses the combination when the client is created "
    "(for example enable.idempotence=true with acks other than all).",
)
def config_rejected(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for role, message in sorted(view.rejected.items()):
        yield rule.finding(
            "property", role, f"a {role} cannot be created from this configuration: {message}",
            "resolve the conflict librdkafka names", evidence={"librdkafka": message, "role": role},
        )  # fmt: skip


@CLIENT_RULES.rule(
    "client-property-wrong-role",
    Severity.INFO,
    "Property for the other client role",
    "librdkafka ignores consumer properties in a producer and vice versa (it only logs a warning), so the "
    "setting the file seems to make has no effect.",
)
def wrong_role(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    if view.catalogue is None or not view.explicit_role or len(view.roles) != 1:
        return
    role = next(iter(view.roles))
    other = "C" if role == "producer" else "P"
    for canonical, written in sorted(view.written_as.items()):
        info = view.catalogue.info(canonical)
        if info is not None and info.scope == other:
            yield rule.finding(
                "property", written, f"{written} applies to {'consumers' if other == 'C' else 'producers'} only; "
                f"a {role} ignores it", "remove it, or lint with the right --role",
            )  # fmt: skip


@CLIENT_RULES.rule(
    "client-unvalidated-property",
    Severity.INFO,
    "Property doctor did not validate",
    "Setting these makes librdkafka load code (plugins, OpenSSL engines); doctor does not do that for a file "
    "it was only asked to read.",
)
def unvalidated(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for problem in view.problems:
        if problem.kind == "unchecked":
            yield rule.finding(
                "property", problem.written, problem.message, "check it where the client runs"
            )  # fmt: skip


# ---------------------------------------------------------------------------------------- producer durability


@CLIENT_RULES.rule(
    "client-acks-not-all",
    Severity.ERROR,
    "Producer does not wait for all in-sync replicas",
    "With acks=0 or 1 a write is acknowledged before the followers have it; when the leader restarts during "
    "maintenance, acknowledged records are lost. min.insync.replicas only protects acks=all writes.",
)
def acks_not_all(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    if not view.is_producer:
        return
    value, _origin = view.value("acks")
    if value is None or value.strip().lower() in ("all", "-1"):
        return
    yield _property_finding(
        rule, view, "acks", f"{view.label('acks')}={value}: acknowledged records can be lost on a leader change",
        recommended=view.recommended("acks"),
    )  # fmt: skip


@CLIENT_RULES.rule(
    "client-idempotence-disabled",
    Severity.WARNING,
    "Idempotent producer disabled",
    "Retries during broker restarts can duplicate or reorder records without idempotence. Enable it - and "
    "handle its fatal errors by recreating the producer ('Once in this state, the producer cannot recover and "
    "must be recreated', MSK operations guide).",
)
def idempotence_disabled(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    if not view.is_producer or view.is_set("transactional.id"):
        return  # transactional producers are idempotent
    value, _origin = view.value("enable.idempotence")
    if value is not None and value.strip().lower() == "true":
        return
    yield _property_finding(
        rule, view, "enable.idempotence", f"enable.idempotence={value}: retries may duplicate or reorder records",
        recommended=view.recommended("enable.idempotence"),
    )  # fmt: skip


@CLIENT_RULES.rule(
    "client-retries-limited",
    Severity.WARNING,
    "Producer retries capped",
    "A broker restart takes minutes and a rolling restart of a whole cluster up to hours; a small retry count "
    "runs out long before that. Bound delivery time with message.timeout.ms and leave retries at librdkafka's "
    "default (effectively unlimited). " + _RETRY_GUIDANCE,
)
def retries_limited(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    if not view.is_producer or not view.is_set("retries") or view.catalogue is None:
        return
    value = view.number("retries")
    default = view.catalogue.default("retries")
    if value is None or default is None or value >= int(default):
        return
    label = view.label("retries")
    yield _property_finding(
        rule, view, "retries", f"{label}={value}: gives up after {value} retries, before a broker restart is over",
        recommended=default, fix=f"remove {label} (librdkafka's default: {default}); tune message.timeout.ms instead",
    )  # fmt: skip


@CLIENT_RULES.rule(
    "client-message-timeout-too-short",
    Severity.ERROR,
    "message.timeout.ms too short",
    "message.timeout.ms bounds the whole delivery, retries included. If it is not longer than socket.timeout.ms "
    "and request.timeout.ms, a message can time out while its only request is still in flight - reported as "
    "failed though the broker may have written it (a duplicate when the application resends). Shorter than a "
    "broker restart plus leader election, a rolling restart fails deliveries instead of delaying them.",
)
def message_timeout(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    if not view.is_producer:
        return
    timeout = view.number("message.timeout.ms")
    if timeout is None or timeout == 0:  # 0 = infinite
        return
    socket_timeout = view.number("socket.timeout.ms")
    request_timeout = view.number("request.timeout.ms")
    recommended = view.recommended("message.timeout.ms")
    label = view.label("message.timeout.ms")
    extra = {"socket.timeout.ms": socket_timeout, "request.timeout.ms": request_timeout}
    shorter_than = [
        f"{name}={value}"
        for name, value in (("socket.timeout.ms", socket_timeout), ("request.timeout.ms", request_timeout))
        if value is not None and timeout <= value
    ]
    if shorter_than:
        yield _property_finding(
            rule, view, "message.timeout.ms",
            f"{label}={timeout} is not longer than {' and '.join(shorter_than)}: messages time out during their "
            "first request", recommended=recommended, extra=extra,
        )  # fmt: skip
    elif recommended is not None and timeout < int(recommended):
        yield _property_finding(
            rule, view, "message.timeout.ms",
            f"{label}={timeout} < {recommended}: a broker restart plus leader election can outlast it",
            recommended=recommended, severity=Severity.WARNING, extra=extra,
        )  # fmt: skip


# ---------------------------------------------------------------------------------------- timeouts


def _at_least(
    rule_id: str, name: str, title: str, why: str, *, severity: Severity = Severity.WARNING, role: str | None = None
) -> None:
    """Register a rule: the effective value must be at least strongroom's recommended value."""

    def check(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
        if (role == "producer" and not view.is_producer) or (role == "consumer" and not view.is_consumer):
            return
        value, recommended = view.number(name), view.recommended(name)
        if value is None or recommended is None or value >= int(recommended):
            return
        yield _property_finding(
            rule, view, name, f"{view.label(name)}={value} < recommended {recommended}", recommended=recommended
        )

    CLIENT_RULES.rule(rule_id, severity, title, why)(check)


_at_least(
    "client-socket-timeout-low",
    "socket.timeout.ms",
    "socket.timeout.ms below the recommendation",
    "Network requests to a broker that is restarting or failing over across availability zones take longer "
    "than on-premise; too short a socket timeout turns a slow response into a failed request and a reconnect. "
    + _LONGER_OUTAGES,
)
_at_least(
    "client-connection-setup-timeout-low",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.ms below the recommendation",
    "Connection set-up includes TLS and SASL handshakes; the guide expects transport errors at 'Initial cluster "
    "connection - Especially with IAM authentication which has additional handshake overhead'.",
)
_at_least(
    "client-request-timeout-low",
    "request.timeout.ms",
    "Producer request.timeout.ms below the recommendation",
    "The broker waits up to request.timeout.ms for the in-sync replicas to acknowledge a write; during "
    "maintenance, replicas catch up slowly and a short timeout fails writes that would have succeeded. "
    + _RETRY_GUIDANCE,
    role="producer",
)
_at_least(
    "client-session-timeout-low",
    "session.timeout.ms",
    "Consumer session.timeout.ms below the recommendation",
    "A consumer that cannot reach its group coordinator for session.timeout.ms is removed from the group and "
    "its partitions rebalanced. Broker restarts routinely cut connections for a while; 'unless all brokers "
    "down errors persist for longer than your configured session.timeout.ms, no intervention is required' "
    "(MSK operations guide) - so it must outlast them.",
    role="consumer",
)
_at_least(
    "client-topic-propagation-short",
    "topic.metadata.propagation.max.ms",
    "topic.metadata.propagation.max.ms below the recommendation",
    "New topics take time to appear on every broker ('Account for MSK's propagation delays', MSK operations "
    "guide); until then librdkafka may declare the topic unknown and fail queued messages.",
    severity=Severity.INFO,
)


@CLIENT_RULES.rule(
    "client-heartbeat-interval-high",
    Severity.WARNING,
    "heartbeat.interval.ms too close to session.timeout.ms",
    "Kafka recommends a heartbeat interval of at most a third of the session timeout, so that a couple of lost "
    "heartbeats (a broker restarting) do not expire the session and trigger a rebalance.",
)
def heartbeat_interval(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    if not view.is_consumer:
        return
    heartbeat, session = view.number("heartbeat.interval.ms"), view.number("session.timeout.ms")
    if heartbeat is None or session is None or heartbeat * 3 <= session:
        return
    yield _property_finding(
        rule, view, "heartbeat.interval.ms",
        f"{view.label('heartbeat.interval.ms')}={heartbeat} > session.timeout.ms/3 ({session // 3})",
        recommended=view.recommended("heartbeat.interval.ms"), extra={"session.timeout.ms": session},
    )  # fmt: skip


# ---------------------------------------------------------------------------------------- metadata


@CLIENT_RULES.rule(
    "client-metadata-recovery-disabled",
    Severity.WARNING,
    "Client does not re-bootstrap when its metadata goes stale",
    "Heal-cluster operations replace brokers without notice; a client that only knows replaced brokers never "
    "finds the cluster again. metadata.recovery.strategy=rebootstrap is the guide's 'Recovery strategy if "
    "metadata becomes corrupted', triggered after metadata.recovery.rebootstrap.trigger.ms.",
)
def metadata_recovery(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    strategy, _origin = view.value("metadata.recovery.strategy")
    recommended = view.recommended("metadata.recovery.strategy")
    if strategy is not None and recommended is not None and strategy != recommended:
        yield _property_finding(
            rule, view, "metadata.recovery.strategy", f"metadata.recovery.strategy={strategy}: no re-bootstrap",
            recommended=recommended,
        )  # fmt: skip
    trigger, trigger_recommended = (
        view.number("metadata.recovery.rebootstrap.trigger.ms"),
        view.recommended("metadata.recovery.rebootstrap.trigger.ms"),
    )
    if trigger is not None and trigger_recommended is not None and trigger > int(trigger_recommended):
        yield _property_finding(
            rule, view, "metadata.recovery.rebootstrap.trigger.ms",
            f"metadata.recovery.rebootstrap.trigger.ms={trigger} > {trigger_recommended}: re-bootstraps late",
            recommended=trigger_recommended, severity=Severity.INFO,
        )  # fmt: skip


def _at_most_soft(view: ClientConfigView, name: str) -> tuple[int, Any, Severity] | None:
    """Above the recommendation: info up to twice it (the guide's gentler settings), warning beyond; -1 = never."""
    value, recommended = view.number(name), view.recommended(name)
    if value is None or recommended is None:
        return None
    if value == -1:
        return value, recommended, Severity.WARNING
    if value <= int(recommended):
        return None
    return value, recommended, Severity.INFO if value <= 2 * int(recommended) else Severity.WARNING


@CLIENT_RULES.rule(
    "client-metadata-refresh-slow",
    Severity.WARNING,
    "Metadata refreshed too rarely",
    "Leadership moves with every broker restart; stale metadata sends requests to the wrong broker and hides "
    "problems such as 'partition count changed from N to 0'. The guide advises 'more aggressive metadata "
    "refresh to detect issues sooner'.",
)
def metadata_refresh(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for name in ("topic.metadata.refresh.interval.ms", "metadata.max.age.ms"):
        result = _at_most_soft(view, name)
        if result is None:
            continue
        value, recommended, severity = result
        what = "periodic refresh disabled" if value == -1 else f"> recommended {recommended}"
        yield _property_finding(
            rule, view, name, f"{view.label(name)}={value}: {what}", recommended=recommended, severity=severity
        )


# ---------------------------------------------------------------------------------------- backoff


def _backoff_checks() -> list[tuple[str, Callable[[int, int], bool], str, Severity]]:
    return [
        ("retry.backoff.max.ms", lambda v, r: v > r, "waits too long between retries once a broker is back",
         Severity.WARNING),
        ("reconnect.backoff.max.ms", lambda v, r: v > r, "notices too late that a restarted broker is back",
         Severity.WARNING),
        ("retry.backoff.ms", lambda v, r: v < r, "retries into a restarting broker too eagerly", Severity.INFO),
        ("reconnect.backoff.ms", lambda v, r: v < r, "reconnects to a restarting broker too eagerly", Severity.INFO),
    ]  # fmt: skip


@CLIENT_RULES.rule(
    "client-backoff-outside-guidance",
    Severity.WARNING,
    "Retry or reconnect backoff outside the guidance",
    "Short, capped backoff: eager enough to resume within seconds of a broker returning, gentle enough not to "
    "hammer a broker that is still starting. " + _RETRY_GUIDANCE,
)
def backoff(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    for name, is_off, effect, severity in _backoff_checks():
        value, recommended = view.number(name), view.recommended(name)
        if value is None or recommended is None or not is_off(value, int(recommended)):
            continue
        yield _property_finding(
            rule, view, name, f"{view.label(name)}={value} (recommended {recommended}): {effect}",
            recommended=recommended, severity=severity,
        )  # fmt: skip


@CLIENT_RULES.rule(
    "client-fetch-queue-backoff-long",
    Severity.INFO,
    "A consumer idles whenever its pre-fetch queue fills",
    "Once a fetch finds the local queue full (queued.min.messages or queued.max.messages.kbytes), librdkafka waits "
    "fetch.queue.backoff.ms before fetching that partition again (1 s by default), however fast the application "
    "empties the queue. A consumer that does work per record (decrypting, writing elsewhere) fills it and then "
    "waits: strongroom's decrypting consumer read 100,000 records of 1 KB at about half its rate with the default.",
)
def fetch_queue_backoff(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    name = "fetch.queue.backoff.ms"
    value, recommended = view.number(name), view.recommended(name)
    if not view.is_consumer or value is None or recommended is None or value <= int(recommended):
        return
    yield _property_finding(
        rule, view, name,
        f"{view.label(name)}={value} (recommended {recommended}): idles up to {value} ms each time the queue fills",
        recommended=recommended,
    )  # fmt: skip


@CLIENT_RULES.rule(
    "client-nagle-enabled",
    Severity.INFO,
    "Nagle's algorithm enabled on broker sockets",
    "Nagle's algorithm delays small requests (heartbeats, metadata, acks) by up to a round trip; the guide's "
    "configuration disables it.",
)
def nagle(rule: ClientRule, view: ClientConfigView, _: None) -> Iterator[Finding]:
    value, _origin = view.value("socket.nagle.disable")
    recommended = view.recommended("socket.nagle.disable")
    if value is not None and recommended is not None and value.strip().lower() != render_value(recommended):
        yield _property_finding(
            rule, view, "socket.nagle.disable", f"socket.nagle.disable={value}", recommended=recommended
        )
