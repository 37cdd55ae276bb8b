"""The JVM data plane's jar: where ``make`` builds it, what it is compiled against, how a session finds it.

The Java source lives in ``java/src/main/java`` (packages ``io.strongroom.dataplane.*``). ``make install``
compiles it with plain ``javac`` against the jars the JVM will run it with, so the classpath comes
from here rather than from a second dependency manager:

* every jar PySpark ships (``pyspark/jars``: Spark, Scala, Jackson 2.18, ...);
* the ``kafka-clients`` jar that Spark's Kafka connector depends on, from the Ivy cache that the
  session warm-up (``python -m strongroom.spark.session``) fills. Its version is read from the
  connector's own Ivy descriptor, so it always matches the connector the session loads;
* the schema-mode libraries (:data:`SCHEMA_LIBRARIES`), resolved by the same warm-up: the JSON Schema
  validator (the JVM engine validates JSON Schema payloads before it seals them, as the client library does
  with ``jsonschema``) and ``protobuf-java`` (Protobuf records read with descriptors the driver compiled).

``python -m strongroom.spark.dataplane classpath`` prints that classpath for the Makefile;
``python -m strongroom.spark.dataplane jar`` prints where the jar is expected.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

from strongroom.errors import StackError

#: Overrides where the jar is looked for (an installed strongroom outside a source checkout).
JAR_ENV: Final = "STRONGROOM_DATAPLANE_JAR"
JAR_NAME: Final = "strongroom-dataplane.jar"
_BUILD_HINT: Final = "run `make install` in the strongroom checkout (it compiles java/ into build/)"
#: The JVM engine's JSON Schema validator (Jackson 2, like Spark's own Jackson; its 3.x line needs Jackson 3).
JSON_SCHEMA_VALIDATOR: Final = "com.networknt:json-schema-validator:1.5.9"
#: The JVM engine's Protobuf runtime: the Java release of the protobuf the client library runs (7.36 in Python).
PROTOBUF_JAVA: Final = "com.google.protobuf:protobuf-java:4.36.2"
#: What schema mode adds to Spark's classpath.
SCHEMA_LIBRARIES: Final = (JSON_SCHEMA_VALIDATOR, PROTOBUF_JAVA)
#: The one dependency of theirs that Spark does not ship (the validator's date-time parsing).
_ITU_JARS: Final = "com.ethlo.time_itu-*.jar"
#: Dependencies of the added packages that PySpark already ships: Ivy must not add a second copy (two
#: Jackson versions on one classpath break both users).
PROVIDED_BY_SPARK: Final = (
    "com.fasterxml.jackson.core:jackson-databind",
    "com.fasterxml.jackson.core:jackson-core",
    "com.fasterxml.jackson.core:jackson-annotations",
    "com.fasterxml.jackson.dataformat:jackson-dataformat-yaml",
    "org.yaml:snakeyaml",
    "org.slf4j:slf4j-api",
)
_KAFKA_CLIENTS: Final = re.compile(r'<dependency org="org\.apache\.kafka" name="kafka-clients" rev="([^"]+)"')


def source_root() -> Path:
    """The checkout this strongroom was imported from (``src/strongroom/..`` twice up)."""
    return Path(__file__).resolve().parents[3]


def dataplane_jar() -> Path:
    """Where the data-plane jar is: ``$STRONGROOM_DATAPLANE_JAR`` or ``build/`` of the checkout."""
    override = os.environ.get(JAR_ENV)
    return Path(override) if override else source_root() / "build" / JAR_NAME


def require_dataplane_jar() -> Path:
    """The jar, or a :class:`StackError` that names ``make`` when it has not been built."""
    jar = dataplane_jar()
    if not jar.is_file():
        raise StackError(f"the JVM data-plane jar {jar} does not exist", hint=_BUILD_HINT)
    return jar


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def ivy_home() -> Path:
    """Spark 4's default Ivy home (``spark.jars.ivy`` unset), where ``spark.jars.packages`` resolves to."""
    return Path.home() / ".ivy2.5.2"


def kafka_clients_jar() -> Path:
    """The ``kafka-clients`` jar of the Kafka connector matching the installed PySpark."""
    from strongroom.spark.session import kafka_connector_package

    _, artifact, version = kafka_connector_package().split(":")
    cache = ivy_home() / "cache"
    descriptor = cache / "org.apache.spark" / artifact / f"ivy-{version}.xml"
    if not descriptor.is_file():
        raise StackError(
            f"Spark's Kafka connector {artifact} {version} is not in the Ivy cache ({descriptor} is missing)",
            hint="run `make install` (its Spark step resolves the connector), with https://repo1.maven.org reachable",
        )
    found = _KAFKA_CLIENTS.search(descriptor.read_text(encoding="utf-8"))
    if found is None:
        raise StackError(f"{descriptor} names no kafka-clients dependency", hint="delete it and run `make install`")
    rev = found.group(1)
    for jar in (
        cache / "org.apache.kafka" / "kafka-clients" / "jars" / f"kafka-clients-{rev}.jar",
        ivy_home() / "jars" / f"org.apache.kafka_kafka-clients-{rev}.jar",
    ):
        if jar.is_file():
            return jar
    raise StackError(f"kafka-clients {rev} is not in the Ivy cache {cache}", hint="run `make install`")


def schema_library_jars() -> list[Path]:
    """The schema-mode libraries' jars and the validator's own dependency (ITU date parsing) in the Ivy cache."""
    jars_dir = ivy_home() / "jars"
    found: list[Path] = []
    for coordinate in SCHEMA_LIBRARIES:
        group, artifact, version = coordinate.split(":")
        jar = jars_dir / f"{group}_{artifact}-{version}.jar"
        if not jar.is_file():
            raise StackError(
                f"{artifact} {version} is not in the Ivy cache {jars_dir}",
                hint="run `make install` (its Spark step resolves it), with https://repo1.maven.org reachable",
            )
        found.append(jar)
    itu = sorted(jars_dir.glob(_ITU_JARS))
    if not itu:
        raise StackError(f"the JSON Schema validator's dependency {_ITU_JARS} is not in the Ivy cache {jars_dir}",
                         hint="run `make install`")  # fmt: skip
    return [*found, itu[-1]]


def compile_classpath() -> str:
    """The ``javac`` classpath: PySpark's jars (as a wildcard), the connector's kafka-clients, schema libraries."""
    jars = (str(pyspark_jars_dir() / "*"), str(kafka_clients_jar()), *map(str, schema_library_jars()))
    return os.pathsep.join(jars)


def runtime_classpath() -> str:
    """What a plain ``java`` process running the data plane's tools needs: the jar, PySpark's, schema libraries."""
    jars = (str(require_dataplane_jar()), str(pyspark_jars_dir() / "*"), *map(str, schema_library_jars()))
    return os.pathsep.join(jars)


def main(argv: list[str]) -> int:
    commands: dict[str, Callable[[], object]] = {"classpath": compile_classpath, "jar": dataplane_jar}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python -m strongroom.spark.dataplane {{{'|'.join(commands)}}}", file=sys.stderr)
        return 2
    try:
        print(commands[argv[0]]())
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
