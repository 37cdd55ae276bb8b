"""Progress of a running Spark action, from the status tracker, for long scans."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")

ProgressFn = Callable[[str, int, int], None]


def with_progress(spark: SparkSession, label: str, action: Callable[[], T], progress: ProgressFn | None) -> T:
    """Run ``action`` (which runs Spark jobs) while reporting finished/total tasks of active stages."""
    if progress is None:
        return action()
    result: dict[str, T] = {}
    error: list[BaseException] = []

    def run() -> None:
        try:
            result["value"] = action()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    worker = threading.Thread(target=run, name=f"strongroom-{label}", daemon=True)
    worker.start()
    tracker = spark.sparkContext.statusTracker()
    while worker.is_alive():
        worker.join(0.5)
        done = total = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        if total:
            progress(label, done, total)
    if error:
        raise error[0]
    return result["value"]
