"""The session carries the JVM data-plane jar: the driver and the tasks load its classes.

The codec is proved in tests/compat/test_jvm_codec*.py in a plain JVM; this checks the wiring that the
JVM writer will use: ``spark.jars`` names the jar ``make`` built, the driver calls it through py4j, and a
task runs it (``java_method``) over the frozen vectors.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from strongroom.spark.dataplane import dataplane_jar

VECTORS = Path(__file__).parents[2] / "compat" / "vectors"
TOOL = "io.strongroom.dataplane.tools.CodecTool"


def _expected_report() -> str:
    return "".join(f"OK {path.stem}\n" for path in sorted(VECTORS.glob("*.json")))


def test_the_session_carries_the_dataplane_jar(spark: SparkSession) -> None:
    jars = spark.sparkContext.getConf().get("spark.jars", "").split(",")
    assert str(dataplane_jar()) in jars


def test_the_driver_checks_the_frozen_vectors_through_py4j(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    report = jvm.io.strongroom.dataplane.tools.CodecTool.vectorReport(str(VECTORS))
    assert report == _expected_report()


def test_tasks_check_the_frozen_vectors(spark: SparkSession) -> None:
    rows = (
        spark.range(2)
        .repartition(2)
        .selectExpr(f"java_method('{TOOL}', 'vectorReport', '{VECTORS}') AS report")
        .collect()
    )
    assert [row.report for row in rows] == [_expected_report()] * 2
