"""Which reader reads Kafka for the audit: the JVM reader (default) or the Python Data Source.

Both read planned offset ranges in the executors with leader epochs and return the same rows
(:mod:`strongroom.audit.schema`, or the chunk digests of :mod:`strongroom.audit.digest`) with the same
options; a ledger captured by one scrubs clean with the other.

* ``jvm`` - ``io.strongroom.dataplane.audit.AuditKafkaSource`` in the data-plane jar
  (``java/src/main/java/io/strongroom/dataplane/audit``): a Spark DataSource V2 that reads with the
  Java ``KafkaConsumer`` and hashes and digests each record in the executor's JVM, so no record
  crosses into a Python worker and no Arrow batch crosses back. The audit's default.
* ``python`` - the ``strongroom-kafka`` Python Data Source (:mod:`strongroom.audit.datasource`,
  confluent-kafka in Python workers). It stays for one reason: it is the reference the JVM reader is
  proven against (the equality tests read the same records with both, and scrub ledgers it captured),
  and a deployment whose Spark cannot load the data-plane jar can still audit with it
  (``--reader python``), slower.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from strongroom.audit.errors import KafkaReadError
from strongroom.errors import StackError

if TYPE_CHECKING:
    from pyspark.sql import DataFrameReader, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader

    from strongroom.kafka.config import ClientConfig

T = TypeVar("T")

#: The JVM reader's class (its format name for ``spark.read`` / ``spark.readStream``).
JVM_SOURCE = "io.strongroom.dataplane.audit.AuditKafkaSource"
#: What every failure of the JVM reader's reads starts with (``AuditReadException.PREFIX``).
JVM_READ_FAILED = "strongroom audit read failed: "


class AuditReader(StrEnum):
    """The audit's Kafka reader (ledger capture and scrub)."""

    JVM = "jvm"  # the Java DataSource V2 in the data-plane jar (default)
    PYTHON = "python"  # the strongroom-kafka Python Data Source (the reference; no jar needed)


DEFAULT_READER = AuditReader.JVM


def reader_format(spark: SparkSession, reader: AuditReader) -> str:
    """The format name of ``reader``, ready to use in ``spark`` (the Python source registered, the JVM
    reader's jar checked to be in the session)."""
    if reader is AuditReader.PYTHON:
        from strongroom.audit.datasource import SOURCE_NAME, register

        register(spark)
        return SOURCE_NAME
    from strongroom.spark.dataplane import JAR_NAME

    if JAR_NAME not in (spark.conf.get("spark.jars", "") or ""):
        raise StackError(
            f"the audit's JVM reader is not in this Spark session ({JAR_NAME} is not in spark.jars)",
            hint="run `make dataplane` and start the Spark session again, or pass --reader python",
        )
    return JVM_SOURCE


def reader_options(client: ClientConfig, reader: AuditReader, **options: Any) -> dict[str, str]:
    """The reader's options: the connection as ``kafka.*`` (librdkafka properties for the Python reader,
    Java client properties for the JVM reader) plus the given reader options."""
    from strongroom.audit.datasource import source_options

    if reader is AuditReader.PYTHON:
        return source_options(client.bootstrap_servers, client.extra, **options)
    java = client.java_client()
    return source_options(java.pop("bootstrap.servers"), java, **options)


def read_batch(spark: SparkSession, client: ClientConfig, reader: AuditReader, **options: Any) -> DataFrameReader:
    """``spark.read`` set up for ``reader`` (call ``.load()``)."""
    return spark.read.format(reader_format(spark, reader)).options(**reader_options(client, reader, **options))


def read_stream(spark: SparkSession, client: ClientConfig, reader: AuditReader, **options: Any) -> DataStreamReader:
    """``spark.readStream`` set up for ``reader`` (call ``.load()``)."""
    return spark.readStream.format(reader_format(spark, reader)).options(**reader_options(client, reader, **options))


@contextmanager
def read_errors() -> Iterator[None]:
    """Turn a failed read of the JVM reader (a Spark job error) into :class:`KafkaReadError` naming the
    partition and the problem."""
    try:
        yield
    except Exception as exc:
        problem = read_failure(str(exc))
        if problem is None:
            raise
        raise KafkaReadError(problem) from None


def read_failure(text: str) -> str | None:
    """The reader's own message in a Spark error's text, or None when the error is something else."""
    at = text.find(JVM_READ_FAILED)
    if at < 0:
        return None
    return text[at + len(JVM_READ_FAILED) :].splitlines()[0].strip()


def guarded(action: Callable[[], T]) -> Callable[[], T]:
    """``action`` with :func:`read_errors` around it."""

    def run() -> T:
        with read_errors():
            return action()

    return run
