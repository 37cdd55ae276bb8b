"""The README's cluster story for real: `strongroom encrypt` and `strongroom decrypt` against a Spark
standalone master and worker (separate JVMs started with spark-class), with the authenticated and
encrypted channel the key service requires, configured the way an operator would (SPARK_CONF_DIR)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from strongroom.testing.spark_standalone import SparkStandalone

pytestmark = pytest.mark.slow


def strongroom(cluster: SparkStandalone, log: Path, *argv: str) -> dict[str, Any]:
    """Run one CLI command as a driver of the cluster; its JSON result."""
    cmd = [sys.executable, "-m", "strongroom.cli.main", "--output", "json", *argv,
           "--spark-master", cluster.master_url, "--spark-conf", "spark.executor.memory=512m"]  # fmt: skip
    with log.open("ab") as err:
        done = subprocess.run(cmd, env=cluster.driver_env(), stdout=subprocess.PIPE, stderr=err, timeout=540)
    assert done.returncode == 0, log.read_text(errors="replace")[-4000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_encrypt_and_decrypt_on_a_standalone_cluster(pipeline_env: Any, tmp_path: Path) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 40, customers=4)
    common = ["--bootstrap-server", env.bootstrap, "--local-kms", env.kms_config["path"],
              "--keys-topic", env.keys_topic, "--fields", "$.name,$.email,$.address"]  # fmt: skip
    log = tmp_path / "drivers.log"
    with SparkStandalone(tmp_path / "spark", cores=1, memory="1g") as cluster:
        encrypted = strongroom(cluster, log, "encrypt", *common, "--topic", topic,
                               "--checkpoint", str(tmp_path / "chk-enc"))  # fmt: skip
        decrypted = strongroom(cluster, log, "decrypt", *common, "--topic", f"{topic}.enc",
                               "--checkpoint", str(tmp_path / "chk-dec"))  # fmt: skip
        # the work ran in the worker's executor, not in the driver
        apps = [p for p in (tmp_path / "spark" / "work").iterdir() if p.name.startswith("app-")]
        assert len(apps) == 2

    assert encrypted["written"] == 40
    assert encrypted["records"] == {"ok": 40}
    assert decrypted["written"] == 40
    assert decrypted["records"] == {"ok": 40}
    sealed = [json.loads(m.value()) for m in env.read(f"{topic}.enc")]
    assert len(sealed) == 40
    assert all(doc["email"].startswith("sr1:") for doc in sealed)
    assert not any(event["email"] in json.dumps(sealed) for event in events)
    plain = sorted((json.loads(m.value()) for m in env.read(f"{topic}.decrypted")), key=lambda d: d["event_id"])
    assert plain == sorted(events, key=lambda d: d["event_id"])
