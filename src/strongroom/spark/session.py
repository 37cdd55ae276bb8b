"""The one place strongroom builds a SparkSession. Everything else takes the session as a parameter.

Local defaults suit a laptop or a 2-core CI machine (``local[2]``, UI off, few shuffle partitions,
quiet logs) and are applied to ``local[...]`` masters only. On a real cluster pass ``master``
(``spark://...``, ``yarn``, ``k8s://...``) and extra ``conf``; under ``spark-submit`` the submitted
master and configuration are kept as they are.

Spark's Kafka connector is not part of PySpark: it is added through ``spark.jars.packages`` with the
artifact matching the installed PySpark, with the JVM engine's schema-mode libraries, resolved by Ivy from
the local Maven repository or Maven Central only (``strongroom/resources/ivysettings.xml``)
into the usual Ivy cache.

The JVM data plane (``make`` builds ``build/strongroom-dataplane.jar`` from ``java/``, see
:mod:`strongroom.spark.dataplane`) is added through ``spark.jars`` whenever it has been built; a caller
that needs it passes ``dataplane=True`` and gets a clear error naming ``make`` when it is missing.

``python -m strongroom.spark.session`` starts and stops a session once, which downloads the
connector into the cache (``make`` does this so tests and the demo start warm).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from strongroom._resources import resource_path
from strongroom.errors import StackError
from strongroom.spark.dataplane import PROVIDED_BY_SPARK, SCHEMA_LIBRARIES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Settings every session strongroom builds gets (a cluster's submitted configuration still wins).
COMMON_DEFAULTS: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.streaming.stateStore.stateSchemaCheck": "true",
}

#: Laptop / CI settings for ``local[...]`` masters only: on a cluster they would tie the driver to the
#: loopback address, cap its memory and starve the shuffles.
LOCAL_DEFAULTS: dict[str, str] = {
    **COMMON_DEFAULTS,
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def session_defaults(master: str) -> dict[str, str]:
    """The settings strongroom adds for ``master`` (before the caller's ``conf``)."""
    return dict(LOCAL_DEFAULTS if is_local_master(master) else COMMON_DEFAULTS)


def kafka_connector_package() -> str:
    """Maven coordinate of Spark's Kafka connector matching the installed PySpark."""
    import pyspark

    version = pyspark.__version__.split("+")[0]
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def spark_packages() -> str:
    """``spark.jars.packages``: the Kafka connector and the JVM engine's schema-mode libraries."""
    return ",".join((kafka_connector_package(), *SCHEMA_LIBRARIES))


def dataplane_jars(jars: str, *, required: bool) -> str:
    """``spark.jars`` with the data-plane jar appended when it exists (or, if ``required``, an error)."""
    from strongroom.spark.dataplane import dataplane_jar, require_dataplane_jar

    jar = require_dataplane_jar() if required else dataplane_jar()
    if not jar.is_file() or str(jar) in jars.split(","):
        return jars
    return f"{jars},{jar}" if jars else str(jar)


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_SUBMIT_OPTS" in os.environ


def jvm_log() -> Path:
    """Where the Spark JVM's own stdout and stderr go (Ivy's report, log4j warnings, crashes)."""
    from strongroom.paths import cache_dir

    path = cache_dir() / "logs" / "spark-jvm.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size > 20 * 1024 * 1024:
        path.replace(path.with_suffix(".log.1"))  # keep one previous generation
    return path


@contextlib.contextmanager
def _jvm_output_to_log() -> Iterator[None]:
    """Start the JVM with its stdout and stderr in :func:`jvm_log`.

    The JVM inherits this process's file descriptors, and Ivy prints a long resolution report at
    every start. Commands promise clean ``--output json`` on stdout and a readable story in text
    mode, so the JVM writes to a log file instead; errors still reach Python as exceptions.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    log_fd = os.open(jvm_log(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log_fd):
            os.close(fd)


def build_spark_session(
    master: str | None = None,
    *,
    app_name: str = "strongroom",
    conf: Mapping[str, str] | None = None,
    kafka: bool = True,
    dataplane: bool = False,
) -> SparkSession:
    """Build (or return the active) SparkSession.

    ``master`` defaults to ``$STRONGROOM_SPARK_MASTER`` or ``local[2]``; under ``spark-submit`` the
    submitted master wins. ``conf`` entries override the defaults; a ``spark.jars`` entry is kept and
    the data-plane jar appended to it. ``dataplane=True`` requires the data-plane jar.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a core dependency
        raise StackError("PySpark is not installed", hint="pip install 'strongroom'") from exc

    # Python workers must run the interpreter that has strongroom and pyarrow installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    builder = SparkSession.builder.appName(app_name)
    submitted = _under_spark_submit()
    if not submitted:
        resolved = master or os.environ.get("STRONGROOM_SPARK_MASTER", "local[2]")
        if is_local_master(resolved):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(resolved)
        for key, value in session_defaults(resolved).items():
            builder = builder.config(key, value)
        log4j = f"-Dlog4j2.configurationFile={resource_path('log4j2-spark.properties')}"
        builder = builder.config("spark.driver.extraJavaOptions", log4j)
        builder = builder.config("spark.executor.extraJavaOptions", log4j)
    if kafka:
        builder = builder.config("spark.jars.packages", spark_packages())
        builder = builder.config("spark.jars.excludes", ",".join(PROVIDED_BY_SPARK))
        builder = builder.config("spark.jars.ivySettings", str(resource_path("ivysettings.xml")))
    settings = dict(conf or {})
    jars = dataplane_jars(settings.get("spark.jars", ""), required=dataplane)
    if jars:
        settings["spark.jars"] = jars
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with _jvm_output_to_log():
            session = builder.getOrCreate()
    except Exception as exc:
        message = str(exc)
        if "JAVA_GATEWAY_EXITED" in message or "Java gateway" in message:
            raise StackError(
                "Spark's JVM did not start (Java missing, or the Kafka connector could not be resolved)",
                hint=f"check `java -version` (17+), that https://repo1.maven.org is reachable, "
                f"and the JVM output in {jvm_log()}",
            ) from exc
        raise
    session.sparkContext.setLogLevel("WARN")
    return session


def main() -> int:
    start = time.monotonic()
    try:
        spark = build_spark_session(app_name="strongroom-warmup")
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    spark.range(1).count()
    spark.stop()
    print(f"Spark with {spark_packages()} ready in {time.monotonic() - start:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
