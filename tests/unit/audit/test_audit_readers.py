"""Choosing the audit's reader: its options, and how a failed JVM read reaches the operator."""

from __future__ import annotations

import pytest

from strongroom.audit.errors import KafkaReadError
from strongroom.audit.readers import DEFAULT_READER, AuditReader, read_errors, read_failure, reader_options
from strongroom.kafka.config import ClientConfig

SASL = ClientConfig(
    "b1:9092",
    extra={"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "audit",
           "sasl.password": "pw", "ssl.ca.location": "/ca.pem"},
)  # fmt: skip


def test_the_jvm_reader_is_the_default() -> None:
    assert DEFAULT_READER is AuditReader.JVM
    assert AuditReader("python") is AuditReader.PYTHON


def test_the_jvm_reader_gets_java_client_properties_and_the_python_reader_librdkafka_ones() -> None:
    jvm = reader_options(SASL, AuditReader.JVM, topics="t", emitRanges=True)
    assert jvm == {
        "kafka.bootstrap.servers": "b1:9092",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="audit" '
        'password="pw";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
        "topics": "t",
        "emitRanges": "true",
    }
    python = reader_options(SASL, AuditReader.PYTHON, topics="t")
    assert python["kafka.sasl.username"] == "audit"
    assert python["kafka.sasl.mechanisms"] == "SCRAM-SHA-512"
    assert "kafka.sasl.jaas.config" not in python


SPARK_ERROR = """py4j.protocol.Py4JJavaError: An error occurred while calling o123.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 4.0 failed 1 times, most recent \
failure: Lost task 0.0 in stage 4.0 (TID 7) (host executor driver): io.strongroom.dataplane.audit.AuditReadException: \
strongroom audit read failed: no progress reading orders-3 at offset 0 (range 0-10) for 3s
\tat io.strongroom.dataplane.audit.RangeRead.waitedOut(RangeRead.java:140)
"""


def test_a_failed_jvm_read_becomes_a_kafka_read_error_naming_the_partition() -> None:
    assert read_failure(SPARK_ERROR) == "no progress reading orders-3 at offset 0 (range 0-10) for 3s"
    assert read_failure("java.lang.OutOfMemoryError: Java heap space") is None
    failed = pytest.raises(KafkaReadError, match=r"^no progress reading orders-3 at offset 0 \(range 0-10\) for 3s \(")
    with failed, read_errors():
        raise RuntimeError(SPARK_ERROR)
    assert "has a leader" in str(failed.excinfo.value.hint)
    with pytest.raises(RuntimeError, match="heap space"), read_errors():
        raise RuntimeError("java.lang.OutOfMemoryError: Java heap space")
