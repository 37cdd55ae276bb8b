"""The recovery demo chapter runs on the real stack and tells the truth: billing fails, then resumes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from strongroom.cli.output import TextOutput
from strongroom.demo.recovery import CHAPTERS
from strongroom.demo.story import DemoContext

pytestmark = pytest.mark.integration


def test_recovery_chapter(
    kafka_cluster: Any, openbao: Any, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = DemoContext(
        out=TextOutput(), workdir=tmp_path, cluster=kafka_cluster, openbao=openbao, spark_factory=lambda: spark
    )
    [(_title, chapter)] = CHAPTERS
    started = time.monotonic()
    facts = chapter(ctx)
    elapsed = time.monotonic() - started
    told = capsys.readouterr().out
    assert "FAILED at payments-encrypted-" in told
    assert "does not exist" in told  # the consumer's error names the lost KEK
    assert facts["lost_records"] == 240
    assert sum(facts["boundaries"].values()) == 240  # every record under KEK A, nothing else
    assert facts["resumed_failure"] is None
    assert facts["resumed_reads"] == 160
    assert facts["safe_to_delete_kek_b"] is False
    assert "(EXECUTED)" in told
    assert elapsed < 120, f"the chapter took {elapsed:.0f}s"
