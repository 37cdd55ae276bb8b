"""The embedded local stack behind ``strongroom dev up|down|status`` and ``make demo``.

It is a Kafka cluster (1 broker by default), a persistent OpenBao with Transit (KEKs survive
``dev down``/``dev up``), an Apicurio schema registry (Confluent API; in memory, empty at every ``up``;
``with_registry=False`` leaves it out), optionally a moto server for the AWS KMS API, and the path of the
local keyring file. ``up`` starts the servers detached from the calling command, records their process
ids and addresses in ``<STRONGROOM_HOME>/dev/state.json``, and returns; ``down`` stops them.
Kafka's data is discarded at ``down`` (the cluster is formatted afresh at every ``up``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strongroom.errors import StackError
from strongroom.paths import dev_dir
from strongroom.runtime import pid_alive
from strongroom.testing.process import kill_pid_group, port_answers


@dataclass
class DevStackState:
    bootstrap_servers: str
    kafka: dict[str, Any]
    openbao: dict[str, Any]
    local_kms_path: str
    moto: dict[str, Any] | None = None
    pids: list[int] = field(default_factory=list)
    #: The schema registry (``url``: the Confluent-compatible API root), or None when left out.
    schema_registry: dict[str, Any] | None = None
    #: ``--kms-config`` files for the stack's KMSes (local keyring, OpenBao), each with the KEK made.
    kms_configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "kafka": self.kafka,
            "openbao": self.openbao,
            "local_kms_path": self.local_kms_path,
            "moto": self.moto,
            "schema_registry": self.schema_registry,
            "schema_registry_url": self.schema_registry["url"] if self.schema_registry else None,
            "pids": self.pids,
            "kms_configs": self.kms_configs,
            "stop_with": "strongroom dev down",
        }


def state_file() -> Path:
    return dev_dir() / "state.json"


def load_state() -> DevStackState | None:
    path = state_file()
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
        return DevStackState(
            bootstrap_servers=raw["bootstrap_servers"],
            kafka=raw["kafka"],
            openbao=raw["openbao"],
            local_kms_path=raw["local_kms_path"],
            moto=raw.get("moto"),
            pids=list(raw.get("pids", [])),
            schema_registry=raw.get("schema_registry"),
            kms_configs=dict(raw.get("kms_configs", {})),
        )
    except (ValueError, KeyError) as exc:
        raise StackError(
            f"the dev stack state file {path} is unreadable ({exc})",
            hint=f"stop any leftover java/bao processes by hand and delete {path}",
        ) from exc


def is_running(state: DevStackState) -> bool:
    return any(pid_alive(pid) for pid in state.pids)


def up(*, brokers: int = 1, with_moto: bool = False, with_registry: bool = True) -> DevStackState:
    """Start the stack detached; if one is already running, return its state unchanged."""
    existing = load_state()
    if existing is not None and is_running(existing):
        return existing
    from strongroom.testing.kafka_cluster import KafkaCluster
    from strongroom.testing.moto_server import MotoServer
    from strongroom.testing.openbao import OpenBaoServer
    from strongroom.testing.schema_registry import SchemaRegistryServer

    base = dev_dir()
    base.mkdir(parents=True, exist_ok=True)
    kafka_dir = base / "kafka"
    shutil.rmtree(kafka_dir, ignore_errors=True)
    started: list[Any] = []
    try:
        bao = OpenBaoServer(persistent_dir=base / "openbao", detached=True).start()
        started.append(bao)
        cluster = KafkaCluster(brokers=brokers, base_dir=kafka_dir, detached=True).start()
        started.append(cluster)
        moto = None
        if with_moto:
            moto = MotoServer(detached=True, log_dir=base / "moto").start()
            started.append(moto)
        registry = None
        if with_registry:
            registry = SchemaRegistryServer(detached=True, log_dir=base / "registry").start()
            started.append(registry)
    except BaseException:
        for server in reversed(started):
            server.stop()
        raise
    kms_configs = _prepare_keys(base, cluster.bootstrap_servers, bao)
    pids = [n["pid"] for n in cluster.describe()["nodes"] if n["pid"]]
    pids += [
        p
        for p in (
            bao.process.pid if bao.process else None,
            moto.process.pid if moto and moto.process else None,
            registry.process.pid if registry and registry.process else None,
        )
        if p
    ]
    state = DevStackState(
        bootstrap_servers=cluster.bootstrap_servers,
        kafka=cluster.describe(),
        openbao=bao.describe(),
        local_kms_path=str(base / "local-kms.json"),
        moto=moto.describe() if moto else None,
        pids=pids,
        schema_registry=registry.describe() if registry else None,
        kms_configs=kms_configs,
    )
    state_file().write_text(json.dumps(state.to_json(), indent=2))
    return state


SUBJECTS_KEK = "strongroom-subjects"


def _prepare_keys(base: Path, bootstrap: str, bao: Any) -> dict[str, str]:
    """The subjects KEK in the local keyring and in OpenBao, the keys topic, and ``--kms-config`` files."""
    from strongroom.kafka.config import ClientConfig
    from strongroom.keys.topic import create_keys_topic
    from strongroom.kms.admin.local import LocalKekAdmin
    from strongroom.kms.admin.vault import VaultKekAdmin
    from strongroom.kms.local import LocalKms

    keyring = base / "local-kms.json"
    local = LocalKms.from_config({"path": str(keyring), "create": True})
    try:
        local.resolve_alias(SUBJECTS_KEK)
    except Exception:  # noqa: BLE001 - UnknownAlias on a new keyring: make the KEK
        LocalKekAdmin(local).create_kek(SUBJECTS_KEK)
    transit = bao.client().secrets.transit
    try:
        transit.read_key(SUBJECTS_KEK)
    except Exception:  # noqa: BLE001 - hvac InvalidPath: the key does not exist yet
        VaultKekAdmin(bao.client()).create_kek(SUBJECTS_KEK)
    create_keys_topic(ClientConfig(bootstrap), partitions=3)
    configs = {
        "local": {"provider": "local", "path": str(keyring)},
        "vault": {"provider": "vault", "address": bao.address, "token": bao.token},
    }
    paths = {}
    for name, config in configs.items():
        path = base / f"kms-{name}.json"
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)  # the vault file holds the dev root token
        paths[name] = str(path)
    return paths


def down() -> dict[str, Any]:
    state = load_state()
    if state is None:
        return {"stopped": [], "message": "no dev stack is running"}
    stopped = []
    for pid in state.pids:
        if pid_alive(pid):
            kill_pid_group(pid)
            stopped.append(pid)
    shutil.rmtree(dev_dir() / "kafka", ignore_errors=True)
    state_file().unlink(missing_ok=True)
    return {"stopped": stopped, "message": f"stopped {len(stopped)} processes"}


def status() -> dict[str, Any]:
    state = load_state()
    if state is None:
        return {"running": False, "message": "no dev stack; start one with `strongroom dev up`"}
    port = int(state.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])
    return {
        "running": is_running(state),
        "kafka_answers": port_answers(port),
        "processes": {str(pid): pid_alive(pid) for pid in state.pids},
        **state.to_json(),
    }
