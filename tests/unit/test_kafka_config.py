"""Resilient client defaults: present, accepted by librdkafka, overridable."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.errors import ConfigError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.properties import read_properties_file
from strongroom.kafka.transport import build_admin, build_consumer, build_producer


def test_defaults_are_accepted_by_librdkafka() -> None:
    cfg = ClientConfig("127.0.0.1:1")
    # Constructing the clients validates every property name and value in librdkafka.
    build_producer({**cfg.producer(), "log_level": 0})
    build_consumer({**cfg.consumer(), "log_level": 0})
    build_admin({**cfg.admin(), "log_level": 0})


def test_resilient_values_and_precedence() -> None:
    cfg = ClientConfig("b:9092", extra={"security.protocol": "SASL_SSL", "acks": "1"})
    producer = cfg.producer({"linger.ms": 50})
    assert producer["metadata.recovery.strategy"] == "rebootstrap"
    assert producer["enable.idempotence"] is True
    assert producer["message.timeout.ms"] > producer["socket.timeout.ms"]
    assert producer["security.protocol"] == "SASL_SSL"
    assert producer["acks"] == "1"  # the user's file wins over our defaults
    assert producer["linger.ms"] == 50  # an explicit override wins over both
    assert cfg.consumer("g1")["group.id"] == "g1"
    assert cfg.consumer()["isolation.level"] == "read_committed"


def test_read_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# comment\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism: PLAIN\n\n! other\nempty=\n")
    assert read_properties_file(str(path)) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "empty": "",
    }


def test_an_error_reads_as_librdkafka_says_it_without_its_wrapper() -> None:
    from confluent_kafka import KafkaError as RdKafkaError
    from confluent_kafka import KafkaException

    from strongroom.kafka.transport import error_code, error_text

    carried = KafkaException(RdKafkaError(RdKafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport"))
    assert error_text(carried) == "Failed to get metadata: Local: Broker transport"
    assert error_code(carried) == RdKafkaError._TRANSPORT
    assert error_text(TimeoutError("no answer")) == "no answer"
    assert error_code(TimeoutError("no answer")) is None


@pytest.mark.parametrize(
    ("bootstrap", "extra", "name"),
    [
        ("127.0.0.1:9092\udcff", None, "bootstrap.servers"),
        ("127.0.0.1:9092", {"sasl.password": "pw\udcff"}, "sasl.password"),
    ],
)
def test_a_setting_that_is_not_utf8_text_is_refused_by_name(
    bootstrap: str, extra: dict[str, str] | None, name: str
) -> None:
    with pytest.raises(ConfigError, match=f"the Kafka client setting '{name}' is not valid UTF-8 text") as err:
        ClientConfig(bootstrap, extra=extra)
    assert "pw" not in str(err.value)
