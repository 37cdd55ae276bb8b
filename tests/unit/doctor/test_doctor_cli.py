"""The doctor CLI: exit codes, one-line errors, JSON output, docs that list every rule.

An unreachable cluster is a real closed port on 127.0.0.1: no server and no JVM are involved.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from strongroom.cli.main import main
from strongroom.doctor import CLIENT_RULES, CLUSTER_RULES
from strongroom.testing.process import free_port

DOCS = Path(__file__).resolve().parents[3] / "docs" / "doctor.md"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", *args], capture_output=True, text=True, check=False, timeout=120
    )


def test_unreachable_cluster_is_one_line_exit_1() -> None:
    port = free_port()
    result = run("doctor", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "2")
    assert result.returncode == 1
    assert result.stdout == ""
    error_lines = [line for line in result.stderr.splitlines() if not line.startswith("...")]
    assert error_lines == [error_lines[0]]
    assert error_lines[0].startswith(f"error: cannot reach Kafka at 127.0.0.1:{port} within 2s")
    assert error_lines[0].endswith("(check --bootstrap-server and network)")
    assert "Traceback" not in result.stderr


def test_unresolvable_host_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "-b", "no-such-host.invalid:9092", "--timeout", "2"]) == 1
    assert "error: cannot resolve Kafka at no-such-host.invalid:9092" in capsys.readouterr().err


def test_misspelled_command_config_property_stops_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechansim=PLAIN\nsasl.password=hunter2\n")
    assert main(["doctor", "-b", f"127.0.0.1:{free_port()}", "--command-config", str(config)]) == 1
    err = capsys.readouterr().err
    assert "no such librdkafka property 'sasl.mechansim'" in err
    assert "did you mean 'sasl.mechanism'?" in err
    assert "hunter2" not in err


def test_java_jaas_in_command_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password="x";\n'
    )
    assert main(["doctor", "-b", "127.0.0.1:1", "--command-config", str(config)]) == 1
    err = capsys.readouterr().err
    assert "'sasl.jaas.config' is a Java-client property" in err
    assert "sasl.username" in err


def test_missing_command_config_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "-b", "127.0.0.1:1", "--command-config", "/nonexistent/admin.properties"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_usage_errors_exit_2() -> None:
    assert run("doctor").returncode == 2  # no --bootstrap-server
    assert run("doctor", "-b", "x:1", "--fail-on", "fatal").returncode == 2


def test_unknown_rule_id_is_a_handled_error_with_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "-b", "127.0.0.1:1", "--rule", "min-isr-equal-rf"]) == 1
    assert "did you mean 'min-isr-equals-rf'?" in capsys.readouterr().err


def test_client_lint_misspelled_property_exit_4_with_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("bootstrap.servers=b:9092\nacks=all\nenable.idempotence=true\nreties=5\n")
    result = run("doctor", "client", "--config", str(config))
    assert result.returncode == 4
    assert "no such librdkafka property: 'reties' (did you mean retries?)" in result.stdout
    assert "rename it to retries" in result.stdout
    as_json = run("--output", "json", "doctor", "client", "--config", str(config), "--fail-on", "critical")
    assert as_json.returncode == 4
    data = json.loads(as_json.stdout)
    assert data["kind"] == "client"
    assert data["target"]["roles"] == ["producer"]
    assert {"rule": "client-unknown-property", "subject": "reties"}.items() <= data["findings"][0].items()


def test_client_lint_fail_on_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("acks=all\nenable.idempotence=true\nsocket.timeout.ms=60000\n")  # warnings only
    assert main(["doctor", "client", "--config", str(config)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["doctor", "client", "--config", str(config), "--fail-on", "warning"]) == 4


def test_client_lint_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "client", "--config", "/nonexistent/client.properties"]) == 1
    assert "error: client configuration file '/nonexistent/client.properties' does not exist" in capsys.readouterr().err


def test_rules_listing_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--output", "json", "doctor", "rules"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in data["cluster"]] == CLUSTER_RULES.ids()
    assert [r["id"] for r in data["client"]] == CLIENT_RULES.ids()


def test_help_documents_exit_codes() -> None:
    result = run("doctor", "--help")
    assert result.returncode == 0
    assert "4  findings at or above --fail-on" in result.stdout
    assert "1  doctor could not run" in result.stdout


def test_docs_list_every_rule_with_its_severity() -> None:
    text = DOCS.read_text()
    for rule in [*CLUSTER_RULES, *CLIENT_RULES]:
        assert f"| `{rule.id}` | {rule.severity.label} |" in text, rule.id
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |"):
        assert code in text


class _Err:
    """Stands in for a librdkafka KafkaError as error_cb reports it (code() and str())."""

    def __init__(self, code: int, text: str) -> None:
        self._code, self._text = code, text

    def code(self) -> int:
        return self._code

    def str(self) -> str:
        return self._text


@pytest.mark.parametrize(
    ("reported", "error_type", "starts"),
    [
        ([_Err(-181, "ssl://b:9093/bootstrap: SSL handshake failed (after 3ms in state SSL_HANDSHAKE)")],
         "ClusterUnreachable", "TLS handshake with Kafka at b:9093 failed: ssl://b:9093/bootstrap: SSL"),
        ([_Err(31, "Broker: Cluster authorization failed")], "ClusterAccessDenied", "not authorised at Kafka b:9093"),
        ([_Err(-195, "b:9093/bootstrap: Connect failed"), _Err(-169, "SASL authentication error: bad")],
         "ClusterAuthenticationFailed", "authentication failed at Kafka b:9093: SASL authentication error: bad"),
        ([], "ClusterUnreachable", "cannot reach Kafka at b:9093 within 3s (Local: Timed out)"),
    ],
)  # fmt: skip
def test_connection_errors_are_classified_from_librdkafka_reports(
    reported: list[_Err], error_type: str, starts: str
) -> None:
    from strongroom.doctor.collect import connection_error

    error = connection_error("b:9093", 3, _Err(-185, "Local: Timed out"), reported, None)
    assert type(error).__name__ == error_type
    assert str(error).startswith(starts)
    assert "(after" not in str(error)
