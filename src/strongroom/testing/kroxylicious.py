"""The real Kroxylicious proxy (0.12.0 jars from Maven Central) in front of the test Kafka, Vault KMS on OpenBao.

``kroxylicious-app`` (the proxy's main class and its bin distribution) is not on Maven Central, so
the proxy is started from a ten-line launcher around ``io.kroxylicious.proxy.KafkaProxy`` run in
Java's single-file source mode. It needs Java 21+: ``$STRONGROOM_JAVA21`` or a Temurin/OpenJDK 21+
under /usr/lib/jvm. Jars are resolved by Maven (``src/strongroom/resources/kroxylicious-pom.xml``)
into ``~/.cache/strongroom/kroxylicious-0.12.0/libs``; nothing fetched is committed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from strongroom._resources import resource_path
from strongroom.paths import cache_dir
from strongroom.testing.process import free_port, port_answers

VERSION = "0.12.0"

LAUNCHER = """
import io.kroxylicious.proxy.KafkaProxy;
import io.kroxylicious.proxy.config.ConfigParser;
import io.kroxylicious.proxy.internal.config.Features;
import java.nio.file.Files;
import java.nio.file.Path;

public class Launcher {
    public static void main(String[] args) throws Exception {
        var parser = new ConfigParser();
        var configuration = parser.parseConfiguration(Files.readString(Path.of(args[0])));
        try (var proxy = new KafkaProxy(parser, configuration, Features.defaultFeatures())) {
            proxy.startup();
            System.out.println("KROXYLICIOUS STARTED");
            proxy.block();
        }
    }
}
"""


def java21() -> str | None:
    """A java executable of version 21 or newer, or None."""
    candidates = [os.environ.get("STRONGROOM_JAVA21", "")]
    candidates += sorted(str(p / "bin" / "java") for p in Path("/usr/lib/jvm").glob("*") if p.is_dir())
    candidates.append(shutil.which("java") or "")
    for java in candidates:
        if not java or not Path(java).exists():
            continue
        out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
        match = re.search(r'version "(\d+)', out)
        if match and int(match.group(1)) >= 21:
            return java
    return None


def libs() -> Path:
    """The proxy's runtime jars, resolved by Maven once and cached."""
    target = cache_dir() / f"kroxylicious-{VERSION}" / "libs"
    stamp = target / ".complete"
    if not stamp.exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mvn", "-q", "-f", str(resource_path("kroxylicious-pom.xml")), "dependency:copy-dependencies",
             f"-DoutputDirectory={target}"],
            check=True, timeout=900,
        )  # fmt: skip
        stamp.touch()
    return target


class KroxyliciousProxy:
    """One proxy process: a virtual cluster in front of ``bootstrap`` with record encryption (Vault KMS).

    With ``portIdentifiesNode`` the proxy listens on a bootstrap port and one port per broker node id
    (the default node id range is 0-2, ports after the bootstrap port), so it is given the cluster's
    node ids and a block of consecutive free ports; a bind lost to a race is retried on a new block.
    """

    def __init__(
        self, java: str, workdir: Path, bootstrap: str, node_ids: list[int], openbao: Any, template: str
    ) -> None:
        self.java, self.workdir, self.bootstrap = java, workdir, bootstrap
        self.openbao, self.template = openbao, template
        self.first_node, self.last_node = min(node_ids), max(node_ids)
        self.port = 0
        self.log = workdir / "kroxylicious.log"
        (workdir / "Launcher.java").write_text(LAUNCHER)
        self.process: subprocess.Popen[bytes] | None = None

    def _config(self) -> str:
        return f"""
virtualClusters:
  - name: strongroom-test
    targetCluster:
      bootstrapServers: {self.bootstrap}
    gateways:
      - name: default
        portIdentifiesNode:
          bootstrapAddress: 127.0.0.1:{self.port}
          nodeStartPort: {self.port + 1}
          nodeIdRanges:
            - name: brokers
              start: {self.first_node}
              end: {self.last_node}
filterDefinitions:
  - name: encrypt
    type: RecordEncryption
    config:
      kms: VaultKmsService
      kmsConfig:
        vaultTransitEngineUrl: {self.openbao.address}/v1/transit
        vaultToken:
          password: {self.openbao.token}
      selector: TemplateKekSelector
      selectorConfig:
        template: "{self.template}"
defaultFilters:
  - encrypt
"""

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0, attempts: int = 3) -> KroxyliciousProxy:
        for attempt in range(1, attempts + 1):
            self.port = free_port(span=2 + self.last_node - self.first_node)
            (self.workdir / "proxy.yaml").write_text(self._config())
            try:
                return self._start_once(timeout)
            except RuntimeError:
                if "Address already in use" not in self.log.read_text() or attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> KroxyliciousProxy:
        argv = [self.java, "-cp", f"{libs()}/*", str(self.workdir / "Launcher.java"), str(self.workdir / "proxy.yaml")]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kroxylicious proxy exited: {self.log.read_text()[-2000:]}")
            if "KROXYLICIOUS STARTED" in self.log.read_text() and port_answers(self.port):
                return self
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the Kroxylicious proxy did not start in {timeout:.0f}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
