"""Erasure (crypto-shredding): mark the subject erased, then tombstone every key of it before the mark.

Order, and why erasure wins every race with key creation:

1. write one erasure marker per subject (``e\\0subject``, the request's who/when/why, no other personal
   data) to the subject's partition and wait for ``acks=all``;
2. read each affected partition from its log start up to the marker and tombstone every live key
   record of the subject found below it.

A key created concurrently lands either below the marker (step 2 sees it and tombstones it) or above it
(its creator reads the partition up to its own key, sees the marker first, and applies the post-erasure
policy). Readers apply the marker itself as "every key of this subject below me is erased", so even a
missed tombstone cannot bring a key back to a reader; tombstones are what make compaction remove the
key records from the topic, which ``strongroom erasure status`` verifies.

Re-running an erasure is safe: a new marker (a new request) and tombstones for whatever is still live.
Erasing an unknown subject is not an error: the marker is written so records that arrive later follow
the post-erasure policy, and the receipt says no keys existed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from strongroom.errors import ConfigError, StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.keys import records
from strongroom.keys.errors import ErasureFailed
from strongroom.keys.records import ErasureMarker, SubjectKeyRecord, SubjectKeyTombstone, check_subject
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT, erasure_deadline_ms
from strongroom.runtime import iso_utc, now_ms, user_name

NO_KEYS_NOTE = "no keys existed; marker written so future records follow the post-erasure policy"


def iso(ms: int) -> str:
    return iso_utc(ms, timespec="milliseconds", zulu=True)


@dataclass
class SubjectErasure:
    subject: str
    partition: int
    marker_offset: int
    keys_tombstoned: int
    key_ids: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class ErasureReceipt:
    """What an erasure did, for the requester's records. Contains subject ids, no other personal data."""

    request_id: str
    requested_by: str
    reason: str
    requested_at: str
    keys_topic: str
    subjects: list[SubjectErasure]
    status: str
    compaction_deadline: str | None
    verify_with: str

    @property
    def keys_tombstoned(self) -> int:
        return sum(s.keys_tombstoned for s in self.subjects)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["keys_tombstoned"] = self.keys_tombstoned
        return data


def read_subjects_file(path: str) -> list[str]:
    """The subjects in a file, one per line, each taken exactly as written: a subject id is matched byte for byte,
    so a line is never trimmed into another subject's id (``" bob"`` is not ``bob``).

    Lines of spaces and tabs only, and lines whose first other character is ``#``, are skipped. A line that starts
    with ``"`` is a JSON string: the way to write an id with spaces around it, one that starts with ``#`` or ``"``,
    or one with characters a line cannot hold. Any other line with spaces or tabs around it is refused by line
    number: which id was meant is a guess, and a wrong guess erases the wrong person while the requested one stays
    readable."""
    text = _subjects_text(path)
    subjects: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")  # a file saved with Windows line ends
        if not line.strip(" \t") or line.lstrip(" \t").startswith("#"):
            continue
        if line.startswith('"'):
            subjects.append(_json_subject(path, number, line))
        elif line != line.strip(" \t"):
            raise ConfigError(
                f"subjects file {path} line {number}: the subject has spaces or tabs around it, and subject ids "
                "are matched exactly",
                hint='remove them, or write the line as a JSON string ("  id") if they are part of the id',
            )
        else:
            subjects.append(line)
    return subjects


def _subjects_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:  # a byte-order mark is not part of the first id
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read subjects file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"subjects file {path} is not UTF-8 text (invalid at byte offset {exc.start})",
            hint="save the file as UTF-8",
        ) from None


def _json_subject(path: str, number: int, line: str) -> str:
    try:
        subject = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"subjects file {path} line {number}: a line starting with a quote must be one JSON string ({exc.msg})",
            hint='close the quote and escape \\ and " inside it, e.g. "  id with spaces"',
        ) from None
    if not isinstance(subject, str):
        raise ConfigError(
            f"subjects file {path} line {number}: a line starting with a quote must be one JSON string",
            hint='write e.g. "#42" for an id that starts with #',
        )
    return subject


def erase(
    client: ClientConfig,
    subjects: Iterable[str],
    *,
    reason: str,
    requested_by: str | None = None,
    topic: str = KEYS_TOPIC_DEFAULT,
    timeout: float = 300.0,
    progress: Callable[[str, int, int], None] | None = None,
) -> ErasureReceipt:
    """Erase ``subjects``: markers first, then tombstones. Returns the receipt.

    Raises :class:`ErasureFailed` if a write is not acknowledged; everything written so far stays, and
    running the same erasure again completes it.
    """
    wanted = _checked_subjects(subjects)
    reason = _checked_reason(reason)
    # the request, stamped on each subject's marker (its subject is filled in per marker)
    request = ErasureMarker("", str(uuid.uuid4()), requested_by or user_name(), reason, now_ms())
    keys_topic = KeysTopic(client, topic)
    keys_topic.check_written_layout()
    with KeysWriter(client, topic) as writer:
        placed = _write_markers(writer, keys_topic, wanted, request, timeout)
        live = _live_keys_below_markers(keys_topic, placed, timeout, progress)
        _write_tombstones(writer, placed, live, timeout)
    return ErasureReceipt(
        request_id=request.request_id,
        requested_by=request.requested_by,
        reason=reason,
        requested_at=iso(request.requested_at_ms),
        keys_topic=topic,
        subjects=[_subject_erasure(s, placed[s], live.get(s, [])) for s in wanted],
        status="pending-verification",
        compaction_deadline=_compaction_deadline(keys_topic),
        verify_with="strongroom erasure status " + (" ".join(wanted) if len(wanted) <= 5 else "--all"),
    )


def _checked_subjects(subjects: Iterable[str]) -> list[str]:
    """The distinct subjects to erase, in order; none, or one that is not a valid subject, is refused."""
    wanted = list(dict.fromkeys(subjects))
    if not wanted:
        raise ConfigError("no subjects to erase", hint="name subjects as arguments or with --from-file")
    for subject in wanted:
        check_subject(subject)
    return wanted


def _checked_reason(reason: str) -> str:
    if not reason or not reason.strip():
        raise ConfigError("an erasure needs a reason (it is recorded with the request)", hint='pass --reason "..."')
    return reason.strip()


def _write_markers(
    writer: KeysWriter, keys_topic: KeysTopic, wanted: list[str], request: ErasureMarker, timeout: float
) -> dict[str, tuple[int, int]]:
    """Each subject's erasure marker, durable before anything else: subject -> (partition, marker offset)."""
    markers = [(keys_topic.partition_of(s), replace(request, subject=s)) for s in wanted]
    offsets = writer.write(markers, error=ErasureFailed, timeout=timeout)
    return {s: (p, o) for s, (p, _), o in zip(wanted, markers, offsets, strict=True)}


def _write_tombstones(
    writer: KeysWriter, placed: dict[str, tuple[int, int]], live: dict[str, list[bytes]], timeout: float
) -> None:
    """A tombstone for every live key record of each subject below its marker, in the marker's partition."""
    tombstones = [
        (placed[subject][0], SubjectKeyTombstone(subject, key_id))
        for subject, key_ids in live.items()
        for key_id in key_ids
    ]
    if tombstones:
        writer.write(tombstones, error=ErasureFailed, timeout=timeout)


def _compaction_deadline(keys_topic: KeysTopic) -> str | None:
    """When compaction must have removed the tombstoned records, from the keys topic's configs (None if unknown)."""
    try:
        return iso(now_ms() + erasure_deadline_ms(keys_topic.config()))
    except StrongroomError:
        return None


def _subject_erasure(subject: str, placed: tuple[int, int], key_ids: list[bytes]) -> SubjectErasure:
    return SubjectErasure(
        subject=subject,
        partition=placed[0],
        marker_offset=placed[1],
        keys_tombstoned=len(key_ids),
        key_ids=[k.hex() for k in key_ids],
        note="" if key_ids else NO_KEYS_NOTE,
    )


def _live_keys_below_markers(
    topic: KeysTopic,
    placed: dict[str, tuple[int, int]],
    timeout: float,
    progress: Callable[[str, int, int], None] | None,
) -> dict[str, list[bytes]]:
    """Key ids of each subject whose record is below the subject's marker and not yet tombstoned."""
    ends: dict[int, int] = {}
    for partition, offset in placed.values():
        ends[partition] = max(ends.get(partition, 0), offset)
    live: dict[str, dict[bytes, int]] = {s: {} for s in placed}

    def report(done: int, total: int) -> None:
        if progress is not None:
            progress("reading the keys topic up to the markers", done, total)

    for raw in topic.scan(ends, end_offsets=ends, timeout=timeout, progress=report):
        key = raw.key
        if not key or not key.startswith(records.SUBJECT_KEY_PREFIX):
            continue
        record = records.decode_or_salvage(key, raw.value)  # a corrupt value is tombstoned too
        if not isinstance(record, SubjectKeyRecord | SubjectKeyTombstone):
            continue
        where = placed.get(record.subject)
        if where is None or raw.offset >= where[1]:
            continue
        if isinstance(record, SubjectKeyRecord):
            live[record.subject][record.key_id] = raw.offset
        else:
            live[record.subject].pop(record.key_id, None)
    return {s: list(keys) for s, keys in live.items() if keys}
