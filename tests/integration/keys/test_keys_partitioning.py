"""Our murmur2 partition choice is Kafka's: checked against librdkafka and against Kafka's own Java code."""

from __future__ import annotations

import random
import string
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.keys.murmur2 import murmur2, subject_partition
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.kafka_dist import ensure_kafka_libs, java_executable

JAVA_CHECK = """
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import org.apache.kafka.common.utils.Utils;

public class Murmur2Check {
    public static void main(String[] args) throws Exception {
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            int hash = Utils.murmur2(line.getBytes(StandardCharsets.UTF_8));
            System.out.println(hash + " " + (Utils.toPositive(hash) % Integer.parseInt(args[1])));
        }
    }
}
"""


def sample_subjects(n: int = 300) -> list[str]:
    rng = random.Random(4)
    alphabet = string.ascii_letters + string.digits + "@.-_ éüß中文😀"
    return [f"user-{i}" for i in range(50)] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(n - 50)
    ]


def test_partitions_match_librdkafkas_murmur2_partitioner(
    kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=7)
    producer = build_producer(ClientConfig(kafka_cluster.bootstrap_servers).producer({"partitioner": "murmur2_random"}))
    delivered: dict[str, int] = {}
    for subject in sample_subjects():
        producer.produce(
            topic,
            key=subject.encode(),
            value=b"x",
            on_delivery=lambda err, msg: delivered.__setitem__(msg.key().decode(), msg.partition()),
        )
    assert producer.flush(30) == 0
    assert delivered == {s: subject_partition(s, 7) for s in delivered}
    assert len(set(delivered.values())) == 7


@pytest.mark.integration  # starts a JVM (Java single-file source launch against kafka-clients)
def test_murmur2_matches_kafkas_java_utils(tmp_path: Path) -> None:
    subjects = [s for s in sample_subjects() if "\n" not in s and s.strip() == s and s]
    source = tmp_path / "Murmur2Check.java"
    source.write_text(JAVA_CHECK)
    listing = tmp_path / "subjects.txt"
    listing.write_text("\n".join(subjects), encoding="utf-8")
    libs = ensure_kafka_libs()
    out = subprocess.run(
        [java_executable(), "-cp", str(libs / "*"), str(source), str(listing), "12"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    lines = out.stdout.split("\n")[: len(subjects)]
    for subject, line in zip(subjects, lines, strict=True):
        java_hash, java_partition = (int(v) for v in line.split())
        assert murmur2(subject.encode()) == java_hash, subject
        assert subject_partition(subject, 12) == java_partition, subject
