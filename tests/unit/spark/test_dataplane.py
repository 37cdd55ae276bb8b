"""The data-plane jar: how the build finds its classpath and how a session picks the jar up (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.errors import StackError
from strongroom.spark import dataplane
from strongroom.spark.session import dataplane_jars, kafka_connector_package, spark_packages


@pytest.fixture
def built_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    jar = tmp_path / "strongroom-dataplane.jar"
    jar.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the session only checks that the file exists
    monkeypatch.setenv(dataplane.JAR_ENV, str(jar))
    return jar


@pytest.fixture
def missing_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    jar = tmp_path / "not-built.jar"
    monkeypatch.setenv(dataplane.JAR_ENV, str(jar))
    return jar


def test_the_default_jar_is_in_the_checkouts_build_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dataplane.JAR_ENV, raising=False)
    jar = dataplane.dataplane_jar()
    assert jar.name == "strongroom-dataplane.jar"
    assert jar.parent.name == "build"
    assert (jar.parent.parent / "java" / "src" / "main" / "java").is_dir()


def test_a_built_jar_is_added_to_spark_jars(built_jar: Path) -> None:
    assert dataplane_jars("", required=False) == str(built_jar)
    assert dataplane_jars("/opt/extra.jar", required=True) == f"/opt/extra.jar,{built_jar}"
    assert dataplane_jars(f"/opt/extra.jar,{built_jar}", required=False) == f"/opt/extra.jar,{built_jar}"


def test_a_missing_jar_is_left_out_unless_it_is_required(missing_jar: Path) -> None:
    assert dataplane_jars("/opt/extra.jar", required=False) == "/opt/extra.jar"
    with pytest.raises(StackError) as raised:
        dataplane_jars("", required=True)
    assert str(missing_jar) in raised.value.problem
    assert "make install" in raised.value.hint


def _ivy_cache(home: Path, kafka_clients: str | None, *, jar: bool = True) -> Path:
    _, artifact, version = kafka_connector_package().split(":")
    descriptor = home / "cache" / "org.apache.spark" / artifact / f"ivy-{version}.xml"
    descriptor.parent.mkdir(parents=True)
    dependency = (
        f'<dependency org="org.apache.kafka" name="kafka-clients" rev="{kafka_clients}" force="true"/>'
        if kafka_clients
        else ""
    )
    descriptor.write_text(f"<ivy-module><dependencies>{dependency}</dependencies></ivy-module>", encoding="utf-8")
    path = home / "cache" / "org.apache.kafka" / "kafka-clients" / "jars" / f"kafka-clients-{kafka_clients}.jar"
    if jar and kafka_clients:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"PK")
    return path


def _schema_library_jars(home: Path) -> list[Path]:
    jars = home / "jars"
    jars.mkdir(parents=True, exist_ok=True)
    made = [jars / "{}_{}-{}.jar".format(*library.split(":")) for library in dataplane.SCHEMA_LIBRARIES]
    made.append(jars / "com.ethlo.time_itu-1.14.0.jar")
    for jar in made:
        jar.write_bytes(b"PK")
    return made


def test_kafka_clients_is_the_version_the_connector_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataplane, "ivy_home", lambda: tmp_path)
    expected = _ivy_cache(tmp_path, "3.9.7")
    libraries = _schema_library_jars(tmp_path)
    assert dataplane.kafka_clients_jar() == expected
    classpath = dataplane.compile_classpath().split(":")
    assert classpath == [str(dataplane.pyspark_jars_dir() / "*"), str(expected), *map(str, libraries)]
    assert any(dataplane.pyspark_jars_dir().glob("jackson-databind-2.*.jar"))


def test_schema_libraries_come_without_a_second_jackson_and_their_absence_names_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "com.fasterxml.jackson.core:jackson-databind" in dataplane.PROVIDED_BY_SPARK
    assert set(dataplane.SCHEMA_LIBRARIES) <= set(spark_packages().split(","))
    assert kafka_connector_package() in spark_packages().split(",")
    monkeypatch.setattr(dataplane, "ivy_home", lambda: tmp_path)
    with pytest.raises(StackError, match=r"json-schema-validator 1\.5\.9 is not in the Ivy cache") as raised:
        dataplane.schema_library_jars()
    assert "make install" in raised.value.hint


@pytest.mark.parametrize(
    ("kafka_clients", "jar", "problem"),
    [(None, False, "names no kafka-clients"), ("3.9.7", False, "kafka-clients 3.9.7 is not in the Ivy cache")],
)
def test_a_cache_without_kafka_clients_names_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kafka_clients: str | None, jar: bool, problem: str
) -> None:
    monkeypatch.setattr(dataplane, "ivy_home", lambda: tmp_path)
    _ivy_cache(tmp_path, kafka_clients, jar=jar)
    with pytest.raises(StackError, match=problem) as raised:
        dataplane.kafka_clients_jar()
    assert "make install" in raised.value.hint


def test_an_empty_cache_names_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dataplane, "ivy_home", lambda: tmp_path)
    assert dataplane.main(["classpath"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Spark's Kafka connector")
    assert "make install" in err
    assert dataplane.main(["nonsense"]) == 2
