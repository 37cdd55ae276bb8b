"""A Spark standalone cluster on this machine: one master and one worker, separate JVMs started with
``spark-class`` from the PySpark distribution (what the README's cluster story runs on).

The cluster is authenticated and encrypted like a real one must be for strongroom's key service
(docs/pipelines.md, "Running on a cluster"): ``spark.authenticate`` with a fresh shared secret and
``spark.network.crypto.enabled``, written to a ``spark-defaults.conf`` (mode 0600) in the cluster's own
``SPARK_CONF_DIR``. Drivers get the same settings by running with :meth:`SparkStandalone.driver_env`
(``spark-submit`` and PySpark read that file), so the secret is never on a command line.

The Kafka connector (and strongroom's data-plane jar) are on the executors' classpath
(``spark.executor.extraClassPath`` in the same file), as when they are installed on every node. Jars
that only arrive with ``spark.jars.packages`` are loaded by the executor's user class loader, and Spark
4.0's Kafka source partitions then fail to deserialize on a standalone executor
(``ClassCastException: cannot assign instance of scala.collection.generic.DefaultSerializationProxy to
field ...DataSourceRDDPartition.inputPartitions``).

Small by default (one core, 1 GiB for executors, 256 MiB per daemon) to fit next to Kafka on 2 cores.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Final

from strongroom.errors import StackError
from strongroom.testing.process import ManagedProcess, free_port, port_answers

MASTER_CLASS: Final = "org.apache.spark.deploy.master.Master"
WORKER_CLASS: Final = "org.apache.spark.deploy.worker.Worker"
#: Log lines that say the master leads and the worker has registered with it.
MASTER_READY: Final = "I have been elected leader"
WORKER_READY: Final = "Successfully registered with master"


def spark_home() -> Path:
    """The PySpark distribution (its ``bin/spark-class`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def node_jars() -> list[Path]:
    """What the nodes have installed: Spark's Kafka connector with its dependencies and the schema-mode
    libraries (from the Ivy cache ``make install`` fills) and the data-plane jar when it is built."""
    from strongroom.spark.dataplane import dataplane_jar, ivy_home, kafka_clients_jar, schema_library_jars
    from strongroom.spark.session import kafka_connector_package

    _, artifact, version = kafka_connector_package().split(":")
    jars_dir = ivy_home() / "jars"
    token_provider = artifact.replace("spark-sql-kafka", "spark-token-provider-kafka")
    wanted = [
        jars_dir / f"org.apache.spark_{artifact}-{version}.jar",
        jars_dir / f"org.apache.spark_{token_provider}-{version}.jar",
        kafka_clients_jar(),
        *sorted(jars_dir.glob("org.apache.commons_commons-pool2-*.jar")),
        *schema_library_jars(),  # the data-plane jar's classes see only the system class path
    ]
    missing = [str(jar) for jar in wanted if not jar.is_file()]
    if missing:
        raise StackError(f"Spark's Kafka connector is not in the Ivy cache ({', '.join(missing)})",
                         hint="run `make install` (its Spark step resolves the connector)")  # fmt: skip
    jar = dataplane_jar()
    return [*wanted, jar] if jar.is_file() else wanted


def _logged(process: ManagedProcess, text: str) -> bool:
    try:
        return text in process.log_path.read_text(errors="replace")
    except OSError:
        return False


class SparkStandalone:
    """Start with :meth:`start` (or ``with``); :attr:`master_url` is what ``--spark-master`` takes."""

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "256m",
        python: str = sys.executable,
    ) -> None:
        #: A temporary directory (removed by :meth:`stop`) unless the caller gives one.
        self._owns_workdir = workdir is None
        self.workdir = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="strongroom-spark-"))
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.python = python
        self.port = free_port()
        self.master: ManagedProcess | None = None
        self.worker: ManagedProcess | None = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def conf_dir(self) -> Path:
        return self.workdir / "conf"

    def driver_env(self) -> dict[str, str]:
        """The environment a driver of this cluster runs with: its ``SPARK_CONF_DIR`` (the shared secret
        and the security settings), loopback addresses, and the Python executors run."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": self.python,
        }

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        spark_class = spark_home() / "bin" / "spark-class"
        if not spark_class.exists():
            raise StackError(f"{spark_class} is missing", hint="reinstall pyspark (`make install`)")
        self._write_conf()
        env = {
            **self.driver_env(),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
        }
        master_argv = [str(spark_class), MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                       "--webui-port", str(free_port())]  # fmt: skip
        self.master = ManagedProcess("Spark master", master_argv, self.workdir / "master.log", env=env)
        try:
            self.master.start()
            self.master.wait_until(
                lambda: port_answers(self.port) and _logged(self.master, MASTER_READY),  # type: ignore[arg-type]
                timeout,
                f"it leads and listens on port {self.port}",
            )
            worker_argv = [
                str(spark_class), WORKER_CLASS, "--host", "127.0.0.1", "--port", str(free_port()),
                "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", str(self.workdir / "work"), self.master_url,
            ]  # fmt: skip
            self.worker = ManagedProcess("Spark worker", worker_argv, self.workdir / "worker.log", env=env)
            self.worker.start()
            self.worker.wait_until(
                lambda: _logged(self.worker, WORKER_READY),  # type: ignore[arg-type]
                timeout,
                "it registered with the master",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in (self.worker, self.master):
            if process is not None:
                process.stop()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _write_conf(self) -> None:
        """spark-defaults.conf with the shared secret (0600) for the master, the worker and drivers."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        path = self.conf_dir / "spark-defaults.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as conf:
            conf.write(
                "spark.authenticate true\n"
                f"spark.authenticate.secret {secrets.token_hex(32)}\n"
                "spark.network.crypto.enabled true\n"
                "spark.ui.enabled false\n"
                f"spark.executor.extraClassPath {os.pathsep.join(str(jar) for jar in node_jars())}\n"
            )
