"""Client configuration lint, judged by the installed librdkafka (no broker needed)."""

from __future__ import annotations

import pytest

from strongroom.doctor import CLIENT_RULES, DoctorReport, Finding, Severity, check_client
from strongroom.doctor.client_config import check_client_config
from strongroom.doctor.java_client import JAVA_ONLY_PROPERTIES
from strongroom.doctor.rdkafka_catalogue import check_property, load_catalogue, parse_properties_table
from strongroom.kafka.config import COMMON_DEFAULTS, CONSUMER_DEFAULTS, PRODUCER_DEFAULTS


def lint(props: dict[str, str], role: str = "auto") -> DoctorReport:
    return check_client(props, source="client.properties", role=role)


def by_rule(report: DoctorReport, rule_id: str) -> list[Finding]:
    return [f for f in report.findings if f.rule_id == rule_id]


def as_properties(table: dict[str, object]) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in table.items()}


# ------------------------------------------------------------------------------------ catalogue


def test_catalogue_is_read_from_the_installed_librdkafka() -> None:
    from confluent_kafka import libversion

    catalogue = load_catalogue()
    assert catalogue is not None
    assert catalogue.version == libversion()[0]
    assert len(catalogue.properties) > 150
    assert catalogue.canonical("acks") == "request.required.acks"
    assert catalogue.canonical("delivery.timeout.ms") == "message.timeout.ms"
    assert catalogue.info("session.timeout.ms").scope == "C"  # type: ignore[union-attr]
    assert catalogue.info("acks").scope == "P"  # type: ignore[union-attr]
    assert catalogue.default("socket.timeout.ms") is not None


def test_every_catalogued_name_is_accepted_by_librdkafka_and_typos_are_not() -> None:
    catalogue = load_catalogue()
    assert catalogue is not None
    for name in catalogue.properties:
        assert check_property(name, "x").status != "unknown", name
    assert check_property("reties", "1").status == "unknown"


def test_suggestions() -> None:
    catalogue = load_catalogue()
    assert catalogue is not None
    assert catalogue.suggestions("reties") == ["retries"]
    assert catalogue.suggestions("socket.timout.ms")[0] == "socket.timeout.ms"
    assert catalogue.suggestions("SOCKET_TIMEOUT_MS") == ["socket.timeout.ms"]
    assert catalogue.suggestions("completely.different.thing") == []


def test_parse_properties_table_reads_aliases_scope_and_deprecation() -> None:
    table = (
        "## Global configuration properties\n\n"
        "Property | C/P | Range | Default | Importance | Description\n"
        "---------|-----|-------|--------:|------------|------------\n"
        "max.in.flight | * | 1 .. 1000000 | 1000000 | low | Alias for `max.in.flight.requests.per.connection`: x\n"
        "socket.blocking.max.ms | * | 1 .. 60000 | 1000 | low | **DEPRECATED** No longer used.\n"
        "## Topic configuration properties\n\n"
        "acks | P | -1 .. 1000 | -1 | high | Alias for `request.required.acks`: y\n"
    )
    parsed = parse_properties_table(table)
    assert parsed["max.in.flight"].alias_of == "max.in.flight.requests.per.connection"
    assert parsed["socket.blocking.max.ms"].deprecated
    assert parsed["acks"].level == "topic"
    assert parsed["acks"].scope == "P"


def test_strongroom_recommendations_are_all_real_librdkafka_properties() -> None:
    for table in (COMMON_DEFAULTS, PRODUCER_DEFAULTS, CONSUMER_DEFAULTS):
        for name, value in as_properties(table).items():
            assert check_property(name, value).status == "ok", name


def test_java_only_table_lists_only_names_librdkafka_refuses() -> None:
    for name in JAVA_ONLY_PROPERTIES:
        assert check_property(name, "x").status in ("unknown", "invalid"), name


def test_plugin_paths_are_never_handed_to_librdkafka() -> None:
    assert check_property("plugin.library.paths", "/tmp/evil.so").status == "unchecked"
    report = lint({"plugin.library.paths": "/tmp/evil.so"})
    assert [f.subject for f in by_rule(report, "client-unvalidated-property")] == ["plugin.library.paths"]
    assert not report.rule_ids() & {"client-config-rejected", "client-invalid-value"}


# ------------------------------------------------------------------------------------ names and values


def test_misspelled_property_gets_the_right_name() -> None:
    report = lint({"acks": "all", "reties": "5"})
    (finding,) = by_rule(report, "client-unknown-property")
    assert finding.subject == "reties"
    assert finding.severity is Severity.CRITICAL
    assert "did you mean retries?" in finding.problem
    assert finding.evidence["suggestions"] == ["retries"]
    assert report.exit_code == 4


def test_java_client_names() -> None:
    report = lint({"acks": "all", "key.serializer": "org.apache...StringSerializer", "fetch.max.wait.ms": "500"})
    found = {f.subject: f for f in by_rule(report, "client-java-only-property")}
    assert set(found) == {"key.serializer", "fetch.max.wait.ms"}
    assert found["fetch.max.wait.ms"].evidence["equivalent"] == "fetch.wait.max.ms"
    # Java names librdkafka accepts as aliases are linted under their librdkafka meaning.
    aliased = lint({"delivery.timeout.ms": "20000", "retries": "3"}, role="producer")
    assert by_rule(aliased, "client-message-timeout-too-short")[0].subject == "delivery.timeout.ms"
    assert by_rule(aliased, "client-retries-limited")[0].subject == "retries"


def test_invalid_values_use_librdkafka_message_and_never_show_secrets() -> None:
    report = lint({"socket.timeout.ms": "5", "auto.offset.reset": "sideways", "sasl.password": "hunter2"})
    found = {f.subject: f for f in by_rule(report, "client-invalid-value")}
    assert set(found) == {"socket.timeout.ms", "auto.offset.reset"}
    assert "outside allowed range" in found["socket.timeout.ms"].problem
    assert "hunter2" not in str(report.to_dict())


def test_properties_refused_together() -> None:
    report = lint({"enable.idempotence": "true", "acks": "1"})
    (finding,) = by_rule(report, "client-config-rejected")
    assert "acks" in finding.problem
    assert finding.severity is Severity.CRITICAL


def test_wrong_role_property_is_info_with_explicit_role() -> None:
    report = lint({"acks": "all", "session.timeout.ms": "45000"}, role="producer")
    assert [f.subject for f in by_rule(report, "client-property-wrong-role")] == ["session.timeout.ms"]


@pytest.mark.parametrize(
    ("props", "roles"),
    [
        ({"group.id": "g"}, ["consumer"]),
        ({"acks": "all"}, ["producer"]),
        ({"acks": "all", "group.id": "g"}, ["consumer", "producer"]),
        ({"socket.timeout.ms": "90000"}, []),
    ],
)
def test_role_detection(props: dict[str, str], roles: list[str]) -> None:
    assert sorted(check_client_config(props, source="f").roles) == roles


# ------------------------------------------------------------------------------------ recommendations


def test_strongroom_own_defaults_pass_every_rule() -> None:
    producer = lint(as_properties(PRODUCER_DEFAULTS), role="producer")
    assert producer.findings == []
    consumer = lint({**as_properties(CONSUMER_DEFAULTS), "group.id": "g"}, role="consumer")
    assert consumer.findings == []


def test_librdkafka_defaults_are_linted_as_defaults() -> None:
    report = lint({}, role="producer")
    socket = by_rule(report, "client-socket-timeout-low")[0]
    assert socket.evidence["origin"].startswith("librdkafka")
    assert socket.evidence["recommended"] == str(COMMON_DEFAULTS["socket.timeout.ms"])
    assert "not set" in socket.problem
    assert "client-idempotence-disabled" in report.rule_ids()
    assert "client-acks-not-all" not in report.rule_ids()  # librdkafka's default acks is all


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks_not_all(acks: str) -> None:
    (finding,) = by_rule(lint({"acks": acks}, role="producer"), "client-acks-not-all")
    assert finding.commands == ("acks=all",)
    assert finding.severity is Severity.ERROR


def test_idempotence_implied_by_transactions() -> None:
    report = lint({"transactional.id": "tx-1"}, role="producer")
    assert "client-idempotence-disabled" not in report.rule_ids()


def test_message_timeout_against_socket_and_request_timeouts() -> None:
    short = lint({"message.timeout.ms": "60000", "socket.timeout.ms": "90000"}, role="producer")
    (finding,) = by_rule(short, "client-message-timeout-too-short")
    assert finding.severity is Severity.ERROR
    assert "socket.timeout.ms=90000" in finding.problem
    softer = lint(
        {"message.timeout.ms": "120000", "socket.timeout.ms": "90000", "request.timeout.ms": "60000"}, role="producer"
    )
    (finding,) = by_rule(softer, "client-message-timeout-too-short")
    assert finding.severity is Severity.WARNING
    assert by_rule(lint({"message.timeout.ms": "0"}, role="producer"), "client-message-timeout-too-short") == []


def test_metadata_settings() -> None:
    report = lint({"metadata.recovery.strategy": "none", "topic.metadata.refresh.interval.ms": "-1"})
    assert by_rule(report, "client-metadata-recovery-disabled")[0].severity is Severity.WARNING
    (refresh,) = [f for f in by_rule(report, "client-metadata-refresh-slow") if f.subject.startswith("topic.")]
    assert refresh.severity is Severity.WARNING
    assert "disabled" in refresh.problem
    # The guide's gentler "preventive" values (1 min / 3 min) are advice, not a warning.
    gentle = lint({"topic.metadata.refresh.interval.ms": "60000", "metadata.max.age.ms": "180000"})
    assert {f.severity for f in by_rule(gentle, "client-metadata-refresh-slow")} == {Severity.INFO}


def test_consumer_session_and_heartbeat() -> None:
    report = lint({"group.id": "g", "session.timeout.ms": "10000", "heartbeat.interval.ms": "5000"})
    assert {"client-session-timeout-low", "client-heartbeat-interval-high"} <= report.rule_ids()
    (hb,) = by_rule(report, "client-heartbeat-interval-high")
    assert hb.evidence["session.timeout.ms"] == 10000


def test_fetch_queue_backoff_flags_a_consumer_that_idles_on_a_full_queue() -> None:
    (unset,) = by_rule(lint({"group.id": "g"}, role="consumer"), "client-fetch-queue-backoff-long")
    assert unset.subject == "fetch.queue.backoff.ms"
    assert unset.evidence["origin"].startswith("librdkafka")
    assert "not set" in unset.problem
    assert unset.commands == (f"fetch.queue.backoff.ms={CONSUMER_DEFAULTS['fetch.queue.backoff.ms']}",)
    (slow,) = by_rule(lint({"group.id": "g", "fetch.queue.backoff.ms": "200"}, role="consumer"),
                      "client-fetch-queue-backoff-long")  # fmt: skip
    assert "idles up to 200 ms" in slow.problem
    assert slow.severity is Severity.INFO
    assert not by_rule(lint({"group.id": "g", "fetch.queue.backoff.ms": "5"}, role="consumer"),
                       "client-fetch-queue-backoff-long")  # fmt: skip
    assert not by_rule(lint({}, role="producer"), "client-fetch-queue-backoff-long")  # producers do not fetch


def test_backoff_severities() -> None:
    report = lint({"reconnect.backoff.max.ms": "60000", "retry.backoff.ms": "50", "retry.backoff.max.ms": "1000"})
    found = {f.subject: f.severity for f in by_rule(report, "client-backoff-outside-guidance")}
    assert found["reconnect.backoff.max.ms"] is Severity.WARNING
    assert found["retry.backoff.ms"] is Severity.INFO
    assert "retry.backoff.max.ms" not in found


def test_every_client_finding_states_recommended_value_and_reason() -> None:
    report = lint({"acks": "1", "socket.timeout.ms": "30000", "group.id": "g", "session.timeout.ms": "6000"})
    for finding in report.findings:
        assert finding.why
        if finding.rule_id.startswith("client-") and "recommended" in finding.evidence:
            assert finding.commands
            assert finding.commands[0].endswith(finding.evidence["recommended"])


def test_client_rule_selection() -> None:
    report = check_client({"acks": "1"}, source="f", role="producer", only=["client-acks-not-all"])
    assert report.rule_ids() == {"client-acks-not-all"}
    assert len(CLIENT_RULES.select(skip=["client-acks-not-all"])) == len(CLIENT_RULES) - 1
