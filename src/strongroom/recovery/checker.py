"""The cheap readability check: can this key prefix's EDEK still be unwrapped? (No record is decrypted.)

One KMS call per *distinct* EDEK: verdicts are cached by prefix, so a partition whose records share
one DEK per time window costs one unwrap per window, however many records it holds. Batches go
through ``Kms.unwrap_many`` (Vault: one ``batch_input`` call per KEK). The unwrapped DEK is dropped
on the spot — only the verdict is kept.

What counts as what:

* **lost** — the KMS answers that the KEK does not exist, is pending deletion / soft-deleted, or is
  disabled (:class:`~strongroom.kms.errors.KekNotFound`, :class:`~strongroom.kms.errors.KekDisabled`),
  or the operator named the KEK with ``--kek`` (assumed lost: a what-if before deleting it);
* **corrupt** — the prefix does not parse, or the KMS rejects the EDEK as invalid;
* **declared lost** — a subject key whose wrapping key an operator marked lost (``recover mark-lost``):
  readers skip its records on purpose, so it counts as handled, like an erased key (no KMS call);
* anything else is **not an answer**: a KMS outage (:class:`~strongroom.kms.errors.KmsUnavailable`,
  already retried by :class:`~strongroom.kms.retrying.RetryingKms`), denied access, a KMS that does
  not match the records' provider, a wrong mount. Those abort with :class:`ScanAborted` — a transient
  failure is never reported as a lost key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from strongroom.envelope.errors import subject_fingerprint
from strongroom.errors import KmsError
from strongroom.kms.api import Edek, KekState, Kms
from strongroom.kms.errors import EdekInvalid, KekDisabled, KekNotFound, KekPendingDeletion, KmsUnavailable
from strongroom.recovery.dependency import KeyDependency, KeyStatus, KeyVerdict, RecordKeys, RecordKind
from strongroom.recovery.errors import ScanAborted
from strongroom.recovery.formats.base import Headers, MalformedPrefix, RecordFormat

#: Distinct EDEKs per ``unwrap_many`` call.
BATCH = 100
#: Cache keys of wrapping-key verdicts (record prefixes start with 0xF5 or 0x00, never with this).
_WK_PREFIX = b"wk:"


def _edek_version(fmt: RecordFormat, edek: Edek) -> str | None:
    version = getattr(fmt, "edek_version", None)
    return version(edek) if callable(version) else None


class ChainLink(Protocol):
    """One subject key's place in the hierarchy (``strongroom.keys.KeyChainLink``)."""

    @property
    def subject(self) -> str: ...

    @property
    def wk_id(self) -> bytes: ...

    @property
    def edek(self) -> Edek | None: ...


class SubjectKeyChain(Protocol):
    """Follows subject keys to their wrapping keys and KEKs: ``strongroom.keys.KeyTable`` is one."""

    def chain_of(self, key_ids: Iterable[bytes]) -> Mapping[bytes, ChainLink]:
        """For each live key id: its subject, wrapping key id and the wrapping key's EDEK (no KMS call)."""
        ...


@dataclass(frozen=True, slots=True)
class RecordVerdict:
    """Whether one record is readable, and the verdicts of its key prefixes."""

    kind: RecordKind
    readable: bool
    verdicts: tuple[KeyVerdict, ...] = ()
    problem: str | None = None

    @property
    def lost(self) -> bool:
        """True when a key this record needs is lost (the condition recovery repairs)."""
        return any(v.status is KeyStatus.LOST for v in self.verdicts)

    @property
    def keks(self) -> list[str]:
        return sorted({v.kek for v in self.verdicts})

    def reason(self) -> str:
        if self.problem:
            return self.problem
        bad = [v for v in self.verdicts if not v.readable]
        return bad[0].reason if bad else ""


@dataclass
class CheckerStats:
    prefixes_checked: int = 0
    cache_hits: int = 0
    unwrap_calls: int = 0
    edeks_unwrapped: int = 0
    by_status: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "distinct_key_prefixes": self.prefixes_checked,
            "cache_hits": self.cache_hits,
            "kms_unwrap_calls": self.unwrap_calls,
            "edeks_unwrapped": self.edeks_unwrapped,
            "by_status": dict(self.by_status),
        }


class AvailabilityChecker:
    """Decides, per key prefix, whether the key is readable, lost or corrupt — caching every answer."""

    def __init__(
        self,
        fmt: RecordFormat,
        kms: Kms | Mapping[str, Kms] | None,
        *,
        assumed_lost: Iterable[str] = (),
        subject_keys: SubjectKeyChain | None = None,
    ) -> None:
        self.format = fmt
        self._kms_by_name: dict[str, Kms] = (
            {} if kms is None else dict(kms) if isinstance(kms, Mapping) else {kms.name: kms}
        )
        self.assumed_lost = frozenset(assumed_lost)
        self.subject_keys = subject_keys
        self._verdicts: dict[bytes, KeyVerdict] = {}
        #: subject key id → (subject fingerprint, wrapping key id hex), for reports (never the subject itself).
        self.subjects: dict[bytes, tuple[str, str]] = {}
        #: wrapping key id hex → (KEK, plan id) of the wrapping keys found declared lost.
        self.declared_lost: dict[str, tuple[str, str]] = {}
        self.stats = CheckerStats()

    # ------------------------------------------------------------------ records
    def check_record(self, headers: Headers, value: bytes | None) -> RecordVerdict:
        """Readability of one record (PLAIN and TOMBSTONE records are readable as they are)."""
        keys = self.format.record_keys(headers, value)
        return self.verdict_of(keys)

    def verdict_of(self, keys: RecordKeys) -> RecordVerdict:
        if keys.kind is RecordKind.MALFORMED:
            return RecordVerdict(keys.kind, False, problem=keys.problem)
        if keys.kind is not RecordKind.ENCRYPTED:
            return RecordVerdict(keys.kind, True)
        if len(keys.prefixes) == 1:  # the common case: one envelope, usually an already-judged DEK
            known = self._verdicts.get(keys.prefixes[0])
            if known is not None:
                self.stats.cache_hits += 1
                return RecordVerdict(keys.kind, known.readable, (known,))
        verdicts = self.check_prefixes(keys.prefixes)
        ordered = tuple(verdicts[p] for p in keys.prefixes)
        return RecordVerdict(keys.kind, all(v.readable for v in ordered), ordered)

    # ------------------------------------------------------------------ prefixes
    def check_prefixes(
        self, prefixes: Iterable[bytes], progress: Callable[[int, int], None] | None = None
    ) -> dict[bytes, KeyVerdict]:
        """Verdicts for many prefixes; unknown ones are parsed and unwrapped in batches of distinct EDEKs."""
        wanted = list(dict.fromkeys(prefixes))
        out: dict[bytes, KeyVerdict] = {}
        todo: list[tuple[bytes, KeyDependency]] = []
        subject: list[tuple[bytes, KeyDependency]] = []
        for prefix in wanted:
            cached = self._verdicts.get(prefix)
            if cached is not None:
                self.stats.cache_hits += 1
                out[prefix] = cached
                continue
            try:
                dependency = self.format.dependency(prefix)
            except MalformedPrefix as exc:
                out[prefix] = self._remember(prefix, KeyVerdict(KeyStatus.CORRUPT, None, str(exc)))
                continue
            if self._assumed_lost(dependency):
                why = f"KEK {dependency.label} is assumed lost (--kek)"
                out[prefix] = self._remember(prefix, KeyVerdict(KeyStatus.LOST, dependency, why))
            elif dependency.subject_key_id is not None:
                subject.append((prefix, dependency))
            else:
                todo.append((prefix, dependency))
        if subject:
            out.update(self._check_subject_keys(subject))
        for start in range(0, len(todo), BATCH):
            out.update(self._unwrap_batch(todo[start : start + BATCH]))
            if progress is not None:
                progress(min(start + BATCH, len(todo)), len(todo))
        return out

    def seen(self) -> dict[bytes, KeyVerdict]:
        """Every verdict reached so far (prefix → verdict)."""
        return dict(self._verdicts)

    def verdict(self, prefix: bytes) -> KeyVerdict:
        return self.check_prefixes([prefix])[prefix]

    def _remember(self, prefix: bytes, verdict: KeyVerdict) -> KeyVerdict:
        self._verdicts[prefix] = verdict
        self.stats.prefixes_checked += 1
        key = verdict.status.value
        self.stats.by_status[key] = self.stats.by_status.get(key, 0) + 1
        return verdict

    def _assumed_lost(self, dependency: KeyDependency) -> bool:
        if not self.assumed_lost:
            return False
        names = {dependency.kek, dependency.kek_id, dependency.label}
        return not names.isdisjoint(self.assumed_lost)

    def kms_for(self, provider: str) -> Kms:
        kms = self._kms_by_name.get(provider)
        if kms is None:
            have = ", ".join(sorted(self._kms_by_name)) or "none"
            raise ScanAborted(
                f"records depend on KEKs of KMS {provider!r}, but the KMS configured for this scan is {have}",
                hint=f"pass the KMS options for {provider!r} (--kms ... ; its name must be {provider!r})",
            )
        return kms

    def _unwrap_batch(self, items: Sequence[tuple[bytes, KeyDependency]]) -> dict[bytes, KeyVerdict]:
        by_edek: dict[Edek, list[tuple[bytes, KeyDependency]]] = {}
        for prefix, dependency in items:
            assert dependency.edek is not None
            by_edek.setdefault(dependency.edek, []).append((prefix, dependency))
        by_provider: dict[str, list[Edek]] = {}
        for edek in by_edek:
            by_provider.setdefault(edek.provider, []).append(edek)
        out: dict[bytes, KeyVerdict] = {}
        for provider, edeks in by_provider.items():
            kms = self.kms_for(provider)
            self.stats.unwrap_calls += 1
            self.stats.edeks_unwrapped += len(edeks)
            try:
                outcomes = kms.unwrap_many(edeks)
            except KmsError as exc:
                raise self._abort(exc, edeks[0]) from exc
            for edek, outcome in zip(edeks, outcomes, strict=True):
                for prefix, dependency in by_edek[edek]:
                    out[prefix] = self._remember(prefix, self._classify(outcome, dependency))
        return out

    def _classify(self, outcome: bytes | KmsError, dependency: KeyDependency) -> KeyVerdict:
        if isinstance(outcome, bytes):
            return KeyVerdict(KeyStatus.READABLE, dependency)  # the DEK itself is dropped here
        if isinstance(outcome, KekNotFound | KekDisabled):
            return KeyVerdict(KeyStatus.LOST, dependency, outcome.problem)
        if isinstance(outcome, EdekInvalid):
            return KeyVerdict(KeyStatus.CORRUPT, dependency, outcome.problem)
        assert dependency.edek is not None
        raise self._abort(outcome, dependency.edek)

    @staticmethod
    def _abort(exc: KmsError, edek: Edek) -> ScanAborted:
        if isinstance(exc, KmsUnavailable):
            return ScanAborted(
                f"the KMS is unavailable, so readability of records under KEK {edek.kek_ref} cannot be decided: "
                f"{exc.problem}",
                hint="this is not a lost key; run the scan again when the KMS answers (no plan was written)",
            )
        return ScanAborted(
            f"the KMS refused to check KEK {edek.kek_ref} ({type(exc).__name__}): {exc.problem}",
            hint=f"{exc.hint}; then run the scan again (no plan was written)",
        )

    def _check_subject_keys(self, items: Sequence[tuple[bytes, KeyDependency]]) -> dict[bytes, KeyVerdict]:
        """Subject key → wrapping key → KEK: one unwrap per distinct wrapping key, never per subject."""
        if self.subject_keys is None:
            raise ScanAborted(
                "records use per-subject keys, whose KEK is found through the keys topic, and no keys topic was given",
                hint="pass --keys-topic (and the KMS options) so recovery can follow subject key → wrapping key → KEK",
            )
        ids = [dep.subject_key_id for _, dep in items if dep.subject_key_id is not None]
        links = self.subject_keys.chain_of(ids)
        wrapping = self._wrapping_keys(links.values())
        self._check_wrapping_keys(wrapping.values())
        out: dict[bytes, KeyVerdict] = {}
        for prefix, dependency in items:
            key_id = dependency.subject_key_id
            assert key_id is not None
            found = links.get(key_id)
            if found is not None:
                self.subjects[key_id] = (subject_fingerprint(found.subject.encode("utf-8")), found.wk_id.hex())
            out[prefix] = self._remember(prefix, self._subject_key_verdict(key_id, dependency, found, wrapping))
        return out

    def _wrapping_keys(self, links: Iterable[ChainLink]) -> dict[bytes, tuple[bytes, KeyDependency]]:
        """wrapping key id → (its verdict prefix, the KEK it depends on), for wrapping keys not declared lost."""
        wrapping: dict[bytes, tuple[bytes, KeyDependency]] = {}
        for link in links:
            if _declared_lost(link) is None and link.edek is not None and link.wk_id not in wrapping:
                wk_dep = KeyDependency(
                    kek=link.edek.kek_ref,
                    kek_id=link.edek.kek_id,
                    provider=link.edek.provider,
                    version=_edek_version(self.format, link.edek),
                    edek=link.edek,
                )
                wrapping[link.wk_id] = (_WK_PREFIX + link.wk_id, wk_dep)
        return wrapping

    def _check_wrapping_keys(self, wrapping: Iterable[tuple[bytes, KeyDependency]]) -> None:
        """A verdict for every wrapping key not judged yet: assumed lost (``--kek``), or unwrapped in batches."""
        todo: list[tuple[bytes, KeyDependency]] = []
        for wk_prefix, wk_dep in wrapping:
            if wk_prefix in self._verdicts:
                continue
            if self._assumed_lost(wk_dep):
                why = f"KEK {wk_dep.label} is assumed lost (--kek)"
                self._remember(wk_prefix, KeyVerdict(KeyStatus.LOST, wk_dep, why))
            else:
                todo.append((wk_prefix, wk_dep))
        for start in range(0, len(todo), BATCH):
            self._unwrap_batch(todo[start : start + BATCH])

    def _subject_key_verdict(
        self,
        key_id: bytes,
        dependency: KeyDependency,
        found: ChainLink | None,
        wrapping: Mapping[bytes, tuple[bytes, KeyDependency]],
    ) -> KeyVerdict:
        """A subject key's verdict: erased, declared lost, missing its wrapping key, or its wrapping key's."""
        if found is None:
            return KeyVerdict(
                KeyStatus.ERASED,
                dependency,
                f"subject key {key_id.hex()} is not live in the keys topic (erased on purpose, or never written)",
            )
        marker = _declared_lost(found)
        if marker is not None:
            return self._declared_lost_verdict(key_id, found, marker)
        if found.edek is None:
            return KeyVerdict(
                KeyStatus.LOST,
                dependency,
                f"wrapping key {found.wk_id.hex()} of subject key {key_id.hex()} is missing from the keys topic",
            )
        wk_prefix, wk_dep = wrapping[found.wk_id]
        wk_verdict = self._verdicts[wk_prefix]
        resolved = KeyDependency(
            kek=wk_dep.kek,
            kek_id=wk_dep.kek_id,
            provider=wk_dep.provider,
            version=wk_dep.version,
            edek=None,
            subject_key_id=key_id,
        )
        reason = wk_verdict.reason
        if reason:
            reason += f" (subject key {key_id.hex()} via wrapping key {found.wk_id.hex()})"
        return KeyVerdict(wk_verdict.status, resolved, reason)

    def _declared_lost_verdict(self, key_id: bytes, found: ChainLink, marker: _LostMarker) -> KeyVerdict:
        """A subject key under a wrapping key declared lost (``recover mark-lost``): skipped on purpose."""
        kek = found.edek.kek_ref if found.edek is not None else marker.kek_ref
        provider, _, kek_id = kek.partition(":")
        self.declared_lost[found.wk_id.hex()] = (kek, marker.plan_id)
        return KeyVerdict(
            KeyStatus.DECLARED_LOST,
            KeyDependency(kek=kek, kek_id=kek_id, provider=provider, version=None, edek=None, subject_key_id=key_id),
            f"subject key {key_id.hex()} was declared lost by plan {marker.plan_id} (wrapping key {found.wk_id.hex()})",
        )

    # ------------------------------------------------------------------ KEK states
    def kek_states(self, dependencies: Iterable[KeyDependency]) -> dict[str, str]:
        """Each KEK's state in its KMS: enabled / disabled / pending_deletion / missing, or ``unknown: why``."""
        states: dict[str, str] = {}
        for dep in dependencies:
            if dep.kek in states or not dep.kek_id:
                continue
            kms = self._kms_by_name.get(dep.provider)
            if kms is None:
                states[dep.kek] = f"unknown: no KMS configured for provider {dep.provider!r}"
                continue
            try:
                state: KekState = kms.describe_kek(dep.kek_id)
            except KmsUnavailable as exc:
                states[dep.kek] = f"unknown: KMS unavailable ({exc.problem})"
                continue
            except KekPendingDeletion:
                state = KekState.PENDING_DELETION
            except KmsError as exc:
                states[dep.kek] = f"unknown: {type(exc).__name__}: {exc.problem}"
                continue
            states[dep.kek] = state.value
        return states


class _LostMarker(Protocol):
    @property
    def plan_id(self) -> str: ...

    @property
    def kek_ref(self) -> str: ...


def _declared_lost(link: ChainLink) -> _LostMarker | None:
    """The lost marker of a link's wrapping key (``KeyChainLink.lost``); chains without the notion have none."""
    marker: _LostMarker | None = getattr(link, "lost", None)
    return marker
