"""The doctor demo chapter on its own, on a private 1-broker cluster like the demo's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strongroom.cli.output import TextOutput
from strongroom.demo.doctor import CHAPTERS, WEAK_KEYS_TOPIC
from strongroom.demo.story import DemoContext
from strongroom.testing.kafka_cluster import KafkaCluster


def test_doctor_chapter(
    kafka_cluster_factory: Callable[..., KafkaCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = kafka_cluster_factory(1)

    def no_spark() -> Any:
        raise AssertionError("the doctor chapter needs no Spark")

    ctx = DemoContext(out=TextOutput(), workdir=tmp_path, cluster=cluster, openbao=None, spark_factory=no_spark)  # type: ignore[arg-type]
    ((_title, chapter),) = CHAPTERS
    facts = chapter(ctx)
    assert facts["topic"] == WEAK_KEYS_TOPIC
    assert facts["findings"] == {
        "keys-topic-deletes-keys": "critical",
        "keys-topic-compaction-blocked": "error",
        "replication-factor-below-3": "error",
    }
    assert facts["cluster_findings"] == ["brokers-fewer-than-3"]
    assert facts["exit_code"] == 4
    assert facts["after_fix"] == ["replication-factor-below-3"]
    assert facts["client_typo_suggestion"] == ["retries"]
    printed = capsys.readouterr().out
    assert "keys-topic-deletes-keys" in printed
    assert "kafka-configs.sh" in printed
