"""Where a pipeline's progress lives, and how it survives what would otherwise replay and duplicate.

The exactly-once sink skips what a committed transaction already wrote by reading the committed
offsets of the consumer group ``strongroom-<app id>``. Two things can take that away:

* **Offsets expire.** The group has no members, so the broker drops a partition's committed offset
  ``offsets.retention.minutes`` (7 days by default) after its last commit: an idle partition forgets
  its progress. Spark's checkpoint still knows it: every micro-batch Spark marked committed
  (``commits/<n>``) ended at ``offsets/<n>``, and the sink had committed at least that far. Before a
  query starts, :func:`restore_progress` puts each forgotten offset back from the checkpoint. When the
  checkpoint's latest batch never committed (a crash) and it read a partition whose offset is gone,
  nothing can tell which of its transactions committed: the pipeline refuses to start and names the
  fix rather than risk duplicates.
* **A moved checkpoint.** The app id defaults to a hash of the checkpoint location. It is written into
  the checkpoint (``strongroom-app.json``) the first time, and read back from there afterwards, so a
  checkpoint copied elsewhere keeps its app id, its consumer group and its transactional ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from strongroom.errors import PipelineError
from strongroom.kafka.transport import commit, committed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from strongroom.kafka.config import ClientConfig

log = logging.getLogger(__name__)

APP_FILE = "strongroom-app.json"
Partition = tuple[str, int]


class _CheckpointFiles:
    """Small files of a Spark checkpoint, through Hadoop's FileSystem (local paths, HDFS, S3 alike)."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._root = jvm.org.apache.hadoop.fs.Path(location)
        self._fs = self._root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def _path(self, *parts: str) -> Any:
        path = self._root
        for part in parts:
            path = self._jvm.org.apache.hadoop.fs.Path(path, part)
        return path

    def read(self, *parts: str) -> str | None:
        path = self._path(*parts)
        if not self._fs.exists(path):
            return None
        from py4j.protocol import Py4JJavaError

        stream = self._fs.open(path)
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        except Py4JJavaError as exc:
            if "ChecksumException" not in exc.java_exception.getClass().getName():
                raise
            crc = f".{path.getName()}.crc"
            raise PipelineError(
                f"the checkpoint file {path} changed after it was written (its checksum file {crc} no longer matches)",
                hint=f"if it was edited on purpose, delete {crc} beside it; otherwise restore the checkpoint",
            ) from None
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def write_whole(self, text: str, *parts: str) -> None:
        """Write ``text`` so that a reader never finds a part of it: into a temporary file beside it, then renamed
        into place (atomic on HDFS and local disks; object stores copy, as for Spark's own checkpoint files). A file
        already there, only ever an empty or damaged one here, is removed first: Hadoop's rename does not replace."""
        target = self._path(*parts)
        temp = self._jvm.org.apache.hadoop.fs.Path(target.getParent(), f".{target.getName()}.{uuid.uuid4().hex}.tmp")
        stream = self._fs.create(temp, False)
        try:
            stream.write(text.encode("utf-8"))
        finally:
            stream.close()
        if self._fs.exists(target):
            self._fs.delete(target, False)
        if not self._fs.rename(temp, target):
            self._fs.delete(temp, False)
            raise PipelineError(
                f"cannot write {target} (renaming its temporary file failed)",
                hint="check that the checkpoint location is writable and that no other pipeline uses it",
            )

    def batch_ids(self, directory: str) -> list[int]:
        path = self._path(directory)
        if not self._fs.exists(path):
            return []
        names = [status.getPath().getName() for status in self._fs.listStatus(path)]
        return sorted(int(name) for name in names if name.isdigit())


def app_id_for(spark: SparkSession, checkpoint: str, kind: str, explicit: str | None) -> str:
    """The pipeline's identity across restarts: explicit, else the one recorded in its checkpoint, else
    a new one derived from the checkpoint location (recorded there now)."""
    files = _CheckpointFiles(spark, checkpoint)
    try:
        text = files.read(APP_FILE)
    except UnicodeDecodeError:
        text = "\ufffd"  # not UTF-8: damaged, as recorded_app_id says
    recorded = recorded_app_id(text, checkpoint, explicit)
    if explicit and recorded and explicit != recorded:
        raise PipelineError(
            f"the checkpoint {checkpoint} belongs to the pipeline with app id {recorded!r}, not {explicit!r}",
            hint=f"pass --app-id {recorded} (or no --app-id), or use a new checkpoint location for a new pipeline",
        )
    app_id = explicit or recorded or f"{kind}-{hashlib.sha256(checkpoint.encode()).hexdigest()[:12]}"
    if recorded is None:
        files.write_whole(json.dumps({"app_id": app_id, "kind": kind}), APP_FILE)
    return app_id


def recorded_app_id(text: str | None, checkpoint: str, explicit: str | None) -> str | None:
    """The app id the checkpoint's app file records (None: none recorded). A damaged file (a crash while it was
    written) is refused unless the app id is given: guessing it would give the pipeline other transactional ids
    and another offsets group, so nothing would fence the writer before the crash and records would repeat."""
    if not text:
        return None
    try:
        recorded = json.loads(text).get("app_id")
        if isinstance(recorded, str) and recorded:
            return recorded
    except (ValueError, AttributeError, RecursionError):
        pass
    if explicit:
        return None  # the given app id is recorded again
    raise PipelineError(
        f"the checkpoint {checkpoint} has a damaged {APP_FILE} (it no longer says which pipeline it belongs to)",
        hint="pass the pipeline's --app-id (its transactional ids and offsets group are named after it)",
    )


@dataclass(frozen=True)
class CheckpointProgress:
    """What a Spark checkpoint of a Kafka-source query says was done."""

    #: End offsets of the latest batch Spark marked committed (everything below was written).
    committed: dict[Partition, int] = field(default_factory=dict)
    #: End offsets of a batch planned but never committed (a crash), if any.
    pending: dict[Partition, int] | None = None


def read_checkpoint(spark: SparkSession, checkpoint: str) -> CheckpointProgress:
    files = _CheckpointFiles(spark, checkpoint)
    planned = files.batch_ids("offsets")
    done = set(files.batch_ids("commits"))
    committed_ids = [n for n in planned if n in done]
    committed = _source_offsets(files.read("offsets", str(committed_ids[-1]))) if committed_ids else {}
    pending = None
    if planned and planned[-1] not in done:
        pending = _source_offsets(files.read("offsets", str(planned[-1])))
    return CheckpointProgress(committed, pending)


def _source_offsets(text: str | None) -> dict[Partition, int]:
    """The Kafka source's offsets in an ``offsets/<n>`` file: ``v1``, the batch metadata, then one line
    per source (``{"topic": {"partition": offset}}``)."""
    if not text:
        return {}
    lines = text.splitlines()
    out: dict[Partition, int] = {}
    for line in lines[2:]:
        try:
            offsets = json.loads(line)
        except ValueError:
            continue
        if isinstance(offsets, dict):
            for topic, parts in offsets.items():
                if isinstance(parts, dict):
                    out.update({(topic, int(p)): int(o) for p, o in parts.items()})
    return out


def restore_progress(client: ClientConfig, group_id: str, progress: CheckpointProgress) -> dict[Partition, int]:
    """Put offsets the group forgot back from the checkpoint; refuse to start when that is not safe.

    Returns the offsets restored.
    """
    relevant = {tp: o for tp, o in progress.committed.items() if o > 0}
    touched = _pending_partitions(progress)
    wanted = partitions_to_restore(progress)
    if not wanted:
        return {}
    known = {tp for tp, offset in committed(client, group_id, wanted).items() if offset >= 0}
    forgotten = [tp for tp in wanted if tp not in known]
    unsafe = sorted(tp for tp in forgotten if tp in touched)
    if unsafe:
        names = ", ".join(f"{t}[{p}]" for t, p in unsafe[:5])
        raise PipelineError(
            f"the consumer group {group_id} no longer has the committed offsets of {names} (they expired after "
            "the broker's offsets.retention.minutes, or the group was deleted), and the checkpoint's last batch "
            "read those partitions but never completed, so it cannot be told which of its records were written",
            hint="restore the group's offsets from your records of the output (kafka-consumer-groups "
            "--reset-offsets), or accept that the last batch may be written twice by restarting with a new "
            "checkpoint and --starting-offsets latest; raise offsets.retention.minutes above the longest pause",
        )
    restore = {tp: relevant[tp] for tp in forgotten if tp in relevant}
    if restore:
        commit(client, group_id, restore)
        log.warning(
            "the consumer group %s had forgotten the committed offsets of %d partitions "
            "(offsets.retention.minutes); restored them from the checkpoint",
            group_id,
            len(restore),
        )
    return restore


def partitions_to_restore(progress: CheckpointProgress) -> list[Partition]:
    """The partitions whose committed offsets :func:`restore_progress` reads: those the checkpoint says were
    written to, or that its unfinished batch read; empty for a new checkpoint."""
    return sorted({tp for tp, o in progress.committed.items() if o > 0} | _pending_partitions(progress))


def _pending_partitions(progress: CheckpointProgress) -> set[Partition]:
    """Partitions the uncommitted batch (if any) planned to read: its end passes the committed batch's."""
    if progress.pending is None:
        return set()
    return {tp for tp, end in progress.pending.items() if end > progress.committed.get(tp, 0)}
