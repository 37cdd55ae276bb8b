"""Exactly-once output across crashes: kill -9 the encrypt pipeline mid-stream, again and again.

The pipeline runs as a real `strongroom encrypt --continuous` process while a producer keeps writing.
It is killed with SIGKILL (whole process group: Python driver and Spark's JVM) at random moments —
between and in the middle of micro-batches and transactions — and restarted from its checkpoint.
At the end every input record must be in the output exactly once (read_committed). The killed
attempts leave aborted transactions in the encrypted topic; `strongroom decrypt` must not read them
(it reads committed data only), so the decrypted topic holds every source record exactly once too.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from strongroom.demo.data import customer_events
from strongroom.kafka.transport import build_producer

pytestmark = pytest.mark.slow


FIELDS = ["--fields", "$.name,$.email,$.address"]


def start_pipeline(env: Any, topic: str, log: Path, rule: list[str] = FIELDS) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "strongroom.cli.main", "encrypt",
        "--bootstrap-server", env.bootstrap, "--local-kms", env.kms_config["path"], "--keys-topic", env.keys_topic,
        "--topic", topic, *rule,
        "--checkpoint", str(env.workdir / "chk"), "--app-id", "kill-test",
        "--continuous", "--trigger-seconds", "1", "--max-offsets-per-trigger", "400",
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("ab"), start_new_session=True)


#: The engines the incarnations alternate between: each engine is killed three times, and each takes over
#: the checkpoint, app id and open transactions the other one left behind when it was killed.
ENGINES = ["python", "jvm"]


def test_killed_repeatedly_on_either_engine_every_record_exactly_once(pipeline_env: Any, tmp_path: Path) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=3)
    total = 6000
    produced = kill_repeatedly_then_finish(env, topic, tmp_path, total, FIELDS, kills=6)
    out = env.read(f"{topic}.enc", idle=3.0)
    ids = [json.loads(m.value())["event_id"] for m in out]
    assert len(produced) == total
    assert len(ids) == total, f"{len(ids) - len(set(ids))} duplicates, {len(set(produced) - set(ids))} missing"
    assert set(ids) == set(produced)
    for m in out[:50]:
        assert json.loads(m.value())["email"].startswith("sr1:")
    abort_a_transaction_of_copies(env, f"{topic}.enc", out[:300])
    decrypted_exactly_once(env, topic, produced, tmp_path, FIELDS)


def kill_repeatedly_then_finish(
    env: Any, topic: str, tmp_path: Path, total: int, rule: list[str], *, kills: int
) -> list[str]:
    """Produce ``total`` events slowly while the pipeline is SIGKILLed ``kills`` times at random moments, the
    incarnations taking turns on the :data:`ENGINES`, then let a last incarnation run until the encrypted topic
    holds ``total`` records. Returns the produced ids."""
    produced: list[str] = []

    def produce_slowly() -> None:
        producer = build_producer(env.client.producer())
        for i, (key, value) in enumerate(customer_events(total, 40)):
            producer.produce(topic, key=key, value=value)
            produced.append(json.loads(value)["event_id"])
            if i % 200 == 199:
                producer.flush(30)
                time.sleep(0.5)
        producer.flush(30)

    writer = threading.Thread(target=produce_slowly)
    writer.start()
    rng = random.Random(20261121)
    log = tmp_path / "pipeline.log"
    killed = 0
    for incarnation in range(kills):
        proc = start_pipeline(env, topic, log, [*rule, "--engine", ENGINES[incarnation % len(ENGINES)]])
        # wait until the query has committed at least one batch in this incarnation, then kill at random
        started = time.monotonic()
        seen = log.read_text(errors="replace").count("records written so far")
        while (
            time.monotonic() - started < 120 and log.read_text(errors="replace").count("records written so far") == seen
        ):
            assert proc.poll() is None, f"pipeline died on its own:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        time.sleep(rng.uniform(0.2, 4.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        killed += 1
    writer.join()

    # A last incarnation runs until everything is through.
    proc = start_pipeline(env, topic, log, [*rule, "--engine", ENGINES[kills % len(ENGINES)]])
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            out = env.read(f"{topic}.enc", idle=2.0)
            if len(out) >= total:
                break
            assert proc.poll() is None, f"pipeline died:\n{log.read_text()[-3000:]}"
            time.sleep(3)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    assert killed == kills
    return produced


def decrypted_exactly_once(env: Any, topic: str, produced: list[str], tmp_path: Path, rule: list[str]) -> None:
    """`strongroom decrypt` of the encrypted topic on each of the :data:`ENGINES` (side by side, each into its
    own output topic) holds every produced event exactly once (read_committed), although the topic also holds
    an aborted transaction of copies (:func:`abort_a_transaction_of_copies`, called first)."""
    total = len(produced)
    aborted = len(env.read(f"{topic}.enc", uncommitted=True)) - total
    assert aborted >= 300

    # The decrypt pipelines read the encrypted topic, aborted transactions included in its log.
    runs = {}
    for engine in ENGINES:
        decrypt = [
            sys.executable, "-m", "strongroom.cli.main", "decrypt",
            "--bootstrap-server", env.bootstrap, "--local-kms", env.kms_config["path"], "--keys-topic", env.keys_topic,
            "--topic", f"{topic}.enc", *rule, "--engine", engine, "--output-topic", f"{topic}.decrypted-{engine}",
            "--checkpoint", str(env.workdir / f"chk-decrypt-{engine}"), "--app-id", f"kill-test-decrypt-{engine}",
        ]  # fmt: skip
        log = tmp_path / f"decrypt-{engine}.log"
        proc = subprocess.Popen(decrypt, stdout=subprocess.DEVNULL, stderr=log.open("ab"), start_new_session=True)
        runs[engine] = (proc, log)
    try:
        for engine, (proc, log) in runs.items():
            assert proc.wait(600) == 0, f"{engine}: {log.read_text(errors='replace')[-3000:]}"
    finally:
        for proc, _ in runs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    for engine in ENGINES:
        plain = env.read(f"{topic}.decrypted-{engine}", idle=3.0)
        decrypted = [json.loads(m.value())["event_id"] for m in plain]
        assert len(decrypted) == total, (
            f"{engine}: {len(decrypted) - len(set(decrypted))} duplicates ({aborted} aborted records in "
            f"{topic}.enc), {len(set(produced) - set(decrypted))} missing"
        )
        assert set(decrypted) == set(produced)
        assert all("@" in json.loads(m.value())["email"] for m in plain[:50])


def abort_a_transaction_of_copies(env: Any, topic: str, records: list[Any]) -> None:
    """What a killed, fenced or retried attempt leaves behind: its records, in a transaction that was aborted.
    The kills may or may not have left one (it takes a kill while a transaction is open), so one is made for
    certain: copies of real encrypted records, written transactionally, then aborted."""
    producer = build_producer(
        env.client.producer({"transactional.id": f"zombie-{topic}", "transaction.timeout.ms": 300_000})
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for m in records:
        producer.produce(topic, key=m.key(), value=m.value(), headers=m.headers(), partition=m.partition())
    producer.flush(60)
    producer.abort_transaction(60)
