"""Apache Kafka from Maven Central: fetch the broker and tools jars once, then run them with java.

The shipped ``strongroom/resources/kafka-pom.xml`` names the artifacts; Maven copies their runtime dependencies
into ``<cache>/kafka-<version>/libs``. The cache is ``$STRONGROOM_CACHE`` or ``~/.cache/strongroom``;
``$STRONGROOM_KAFKA_LIBS`` points at an existing jar directory instead (a Kafka distribution's
``libs/`` works too); ``$STRONGROOM_MAVEN_ARGS`` adds arguments to the Maven call (``-s settings.xml``
for a corporate mirror, ``-o`` for offline).

``python -m strongroom.testing.kafka_dist`` fetches the jars and prints their directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from strongroom._resources import resource_path
from strongroom.errors import StackError
from strongroom.paths import cache_dir
from strongroom.testing.maven import fetch_into, fetched, maven

KAFKA_VERSION = "4.3.1"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


def kafka_libs_dir(version: str = KAFKA_VERSION) -> Path:
    override = os.environ.get("STRONGROOM_KAFKA_LIBS")
    if override:
        return Path(override)
    return cache_dir() / f"kafka-{version}" / "libs"


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise StackError(
            "no `java` on PATH and JAVA_HOME is not set",
            hint="install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)",
        )
    return java


def java_major_version() -> int:
    out = subprocess.run([java_executable(), "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise StackError(f"cannot read the Java version from: {out.strip()!r}", hint="install Java 17+")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def ensure_kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """Return the jar directory, fetching it with Maven on first use."""
    libs = kafka_libs_dir(version)
    if fetched(libs) or (os.environ.get("STRONGROOM_KAFKA_LIBS") and any(libs.glob("kafka_2.13-*.jar"))):
        return libs
    if os.environ.get("STRONGROOM_KAFKA_LIBS"):
        raise StackError(
            f"STRONGROOM_KAFKA_LIBS={libs} holds no kafka_2.13-*.jar",
            hint="point it at a Kafka distribution's libs/ directory or unset it",
        )
    if java_major_version() < 17:
        raise StackError("Kafka 4 needs Java 17 or newer", hint="install Java 17+ and put it first on PATH")
    pom = resource_path("kafka-pom.xml")
    goal = ["-f", str(pom), DEPENDENCY_PLUGIN, f"-Dkafka.version={version}", "-DincludeScope=runtime"]
    maven("the Kafka jars", otherwise="set STRONGROOM_KAFKA_LIBS")
    fetch_into(libs, "Apache Kafka", version, goal)
    return libs


def main() -> int:
    try:
        print(ensure_kafka_libs())
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
