"""KEK rotation for the key hierarchy: rewrap every wrapping key under the current KEK version, or a new KEK.

Only wrapping keys (WK) are wrapped by the KMS, so rotating the KEK touches a handful of records, not
one per subject: each WK is unwrapped and wrapped again (the WK itself, and every subject key under it,
stays the same — running readers keep working), and the new record is written under the same message
key, so compaction replaces the old EDEK.

Idempotent and resumable: a WK already under the target KEK and its current version is skipped, so a
rerun after a failure only does what is left — unless its EDEK is not yet bound to its WK id (written
by a strongroom before EDEK binding, :func:`~strongroom.keys.records.wk_edek_context`): that one is
rewrapped, bound, whatever its version. The current version is learnt by wrapping a random probe
once per KEK (providers without visible versions, like AWS KMS whose rotation keeps old material
usable, are only rewrapped when moving to another KEK). Every new EDEK is unwrapped once and compared
before it is written, so a rewrap can never replace a working EDEK with a broken one.

Retiring old KEK versions afterwards (Vault/OpenBao Transit): when the report shows every WK of a KEK
at version >= N, set ``min_decryption_version=N`` on the Transit key (``vault write
transit/keys/<name>/config min_decryption_version=N``) — after checking that nothing else (WRAPPED_DEK
topics) still uses older versions — and only then trim the versions (``min_available_version``).
"""

from __future__ import annotations

import hmac
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from strongroom.errors import KmsError, StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.keys import records
from strongroom.keys.errors import RewrapFailed
from strongroom.keys.records import WrappingKeyRecord, WrappingKeyTombstone, wk_edek_context
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT
from strongroom.kms.api import Edek, Kms
from strongroom.kms.wrapper import KmsWrapper
from strongroom.runtime import now_ms

_VAULT_VERSION: Final = re.compile(rb"^vault:v(\d+):")


def kek_version(edek: Edek, kms: Kms | None = None) -> int | None:
    """The KEK version an EDEK was wrapped with, when the provider makes it visible.

    Vault/OpenBao carry it in the ciphertext (``vault:vN:``); the local KMS in its EDEK header
    (recognised through ``kms``, or by the provider name ``local`` when no KMS is at hand).
    """
    match = _VAULT_VERSION.match(edek.ciphertext)
    if match:
        return int(match.group(1))
    inner = kms.unwrapped() if isinstance(kms, KmsWrapper) else kms
    from strongroom.kms.local import LocalKms, edek_kek_version

    if isinstance(inner, LocalKms) or (inner is None and edek.provider == "local"):
        try:
            return edek_kek_version(edek.ciphertext)
        except KmsError:
            return None
    return None


@dataclass
class RewrapReport:
    target_kek: str | None
    wrapping_keys: int = 0
    rewrapped: int = 0
    skipped: int = 0
    #: Wrapping keys under other KEKs, left alone because the rewrap was limited to one KEK.
    other_keks: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)
    versions_before: dict[str, dict[str, int]] = field(default_factory=dict)
    versions_after: dict[str, dict[str, int]] = field(default_factory=dict)
    retire: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_wrapping_keys(
    topic: KeysTopic, timeout: float = 600.0, progress: Callable[[int, int], None] | None = None
) -> dict[bytes, tuple[int, WrappingKeyRecord]]:
    """The latest record of every wrapping key in the keys topic, with its partition."""
    found: dict[bytes, tuple[int, WrappingKeyRecord]] = {}
    for raw in topic.scan(timeout=timeout, progress=progress):
        if not raw.key or not raw.key.startswith(records.WRAPPING_KEY_PREFIX):
            continue
        try:
            record = records.decode(raw.key, raw.value)
        except StrongroomError:
            continue
        if isinstance(record, WrappingKeyRecord):
            found[record.wk_id] = (raw.partition, record)
        elif isinstance(record, WrappingKeyTombstone):
            found.pop(record.wk_id, None)
    return found


def _versions(kms: Kms, wks: list[WrappingKeyRecord]) -> dict[str, dict[str, int]]:
    counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for wk in wks:
        version = kek_version(wk.edek, kms)
        counts[wk.kek_ref]["?" if version is None else str(version)] += 1
    return {kek: dict(sorted(c.items())) for kek, c in sorted(counts.items())}


def rewrap(
    client: ClientConfig,
    kms: Kms,
    *,
    topic: str = KEYS_TOPIC_DEFAULT,
    to_kek_alias: str | None = None,
    only_kek: str | None = None,
    batch_size: int = 100,
    dry_run: bool = False,
    timeout: float = 600.0,
    progress: Callable[[str, int, int], None] | None = None,
) -> RewrapReport:
    """Rewrap every wrapping key of ``topic`` (see the module docstring), or only those under KEK ``only_kek``
    (``provider:kek-id``, as ``kek inventory`` names it: with a KEK per topic, each KEK is rewrapped on its
    own and the other KEKs' wrapping keys stay where they are). Raises :class:`RewrapFailed` after doing
    everything it could when some wrapping keys failed (the report is on the exception)."""
    target_id = kms.resolve_alias(to_kek_alias) if to_kek_alias else None
    report = RewrapReport(target_kek=None if target_id is None else f"{kms.name}:{target_id}")

    def scanned(done: int, total: int) -> None:
        if progress is not None:
            progress("reading wrapping keys", done, total)

    found = read_wrapping_keys(KeysTopic(client, topic), timeout, scanned)
    if only_kek is not None:
        mine = {wk_id: entry for wk_id, entry in found.items() if entry[1].kek_ref == only_kek}
        report.other_keks = len(found) - len(mine)
        found = mine
    report.wrapping_keys = len(found)
    report.versions_before = _versions(kms, [wk for _, wk in found.values()])
    todo = _to_rewrap(kms, found, target_id, report)
    after = {wk.wk_id: wk for _, wk in found.values()}
    if not dry_run and todo:
        after.update(_write_rewrapped(client, topic, kms, todo, report, batch_size, timeout, progress))
    report.versions_after = _versions(kms, list(after.values()))
    report.retire = _retire_advice(report.versions_after)
    if report.failed:
        error = RewrapFailed(f"{len(report.failed)} of {report.wrapping_keys} wrapping keys could not be rewrapped")
        error.report = report  # type: ignore[attr-defined]
        raise error
    return report


def _to_rewrap(
    kms: Kms, found: dict[bytes, tuple[int, WrappingKeyRecord]], target_id: str | None, report: RewrapReport
) -> list[tuple[int, WrappingKeyRecord, str]]:
    """The wrapping keys to rewrap, each with its partition and target KEK; the others are counted as
    skipped (already at the target's current version and bound) or failed (another KMS, KMS errors)."""
    current: dict[str, int | None] = {}

    def current_version(kek_id: str) -> int | None:
        if kek_id not in current:
            current[kek_id] = kek_version(kms.wrap(kek_id, os.urandom(32)), kms)
        return current[kek_id]

    todo: list[tuple[int, WrappingKeyRecord, str]] = []
    for partition, wk in found.values():
        if wk.edek.provider != kms.name:
            report.failed.append(
                {"wk_id": wk.wk_id.hex(), "error": f"wrapped by KMS {wk.edek.provider!r}, this KMS is {kms.name!r}"}
            )
            continue
        target = target_id or wk.edek.kek_id
        try:
            version = current_version(target)
        except KmsError as exc:
            report.failed.append({"wk_id": wk.wk_id.hex(), "error": str(exc)})
            continue
        up_to_date = target == wk.edek.kek_id and (version is None or kek_version(wk.edek, kms) == version)
        if up_to_date and wk.edek.context:  # an unbound EDEK (older strongroom) is rewrapped to bind it
            report.skipped += 1
            continue
        todo.append((partition, wk, target))
    return todo


def _write_rewrapped(
    client: ClientConfig,
    topic: str,
    kms: Kms,
    todo: list[tuple[int, WrappingKeyRecord, str]],
    report: RewrapReport,
    batch_size: int,
    timeout: float,
    progress: Callable[[str, int, int], None] | None,
) -> dict[bytes, WrappingKeyRecord]:
    """Rewrap ``todo`` in chunks and write each chunk's new records; returns them by wrapping-key id."""
    written: dict[bytes, WrappingKeyRecord] = {}
    with KeysWriter(client, topic) as writer:
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            rewritten = _rewrap_chunk(kms, chunk, report)
            if rewritten:
                writer.write(rewritten, error=RewrapFailed, timeout=timeout)
                written.update((record.wk_id, record) for _, record in rewritten)
                report.rewrapped += len(rewritten)
            if progress is not None:
                progress("rewrapping", start + len(chunk), len(todo))
    return written


def _rewrap_chunk(
    kms: Kms, chunk: list[tuple[int, WrappingKeyRecord, str]], report: RewrapReport
) -> list[tuple[int, WrappingKeyRecord]]:
    try:
        plaintexts = kms.unwrap_many([wk.edek for _, wk, _ in chunk])
    except KmsError as exc:
        report.failed.extend({"wk_id": wk.wk_id.hex(), "error": str(exc)} for _, wk, _ in chunk)
        return []
    rewritten: list[tuple[int, WrappingKeyRecord]] = []
    for (partition, wk, target), plaintext in zip(chunk, plaintexts, strict=True):
        if isinstance(plaintext, KmsError):
            report.failed.append({"wk_id": wk.wk_id.hex(), "error": str(plaintext)})
            continue
        try:
            edek = kms.wrap(target, plaintext, wk_edek_context(wk.wk_id))  # binds a legacy unbound EDEK too
            if not hmac.compare_digest(kms.unwrap(edek), plaintext):
                raise RewrapFailed(f"the new EDEK of wrapping key {wk.wk_id.hex()} does not unwrap to the same key")
        except StrongroomError as exc:
            report.failed.append({"wk_id": wk.wk_id.hex(), "error": str(exc)})
            continue
        rewritten.append((partition, WrappingKeyRecord(wk.wk_id, edek, now_ms())))
    return rewritten


def _retire_advice(versions: dict[str, dict[str, int]]) -> list[str]:
    advice: list[str] = []
    for kek_ref, counts in versions.items():
        known = [int(v) for v in counts if v != "?"]
        if not known or "?" in counts:
            continue
        lowest = min(known)
        name = kek_ref.partition(":")[2]
        if lowest > 1:
            advice.append(
                f"{kek_ref}: every wrapping key uses version >= {lowest}; versions below {lowest} are no longer "
                f"needed by the keys topic (Vault/OpenBao: `vault write transit/keys/{name}/config "
                f"min_decryption_version={lowest}` once no other data uses them)"
            )
    return advice
