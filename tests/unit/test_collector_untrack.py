"""Long-lived cache entries stay out of the cyclic collector's passes (``runtime.untracked``).

A producer over 100,000 subjects kept about 400,000 collector-tracked objects in its caches (a key, its cache
entry, a sealer and its slot per subject), and each full pass walked them all, and walked every entry of the
caches' mappings: about 165 ms a pass in the middle of a batch. Nothing in those caches can be part of a
reference cycle, so they are taken out of the passes; reference counting still frees them.
"""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from strongroom.clients.batch_seal import SealItem, SubjectSealers
from strongroom.envelope import AadProfile
from strongroom.keys.cache import KeyCache
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.table import SubjectKey, _Lru
from strongroom.keys.usage import SealLedger, SubjectKeyLimits
from strongroom.runtime import untracked

SUBJECTS = 2_000


def subject_key(subject: str) -> SubjectKey:
    return SubjectKey(subject=subject, key_id=os.urandom(16), key=os.urandom(32))


@pytest.fixture
def quiet_collector() -> Iterator[None]:
    """No collector pass of its own during a count: the counts compare what the code tracks."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def tracked_now() -> int:
    """The objects the collector would walk in its next full pass (after a pass has untracked the tuples and
    dicts that hold only atomic values, as CPython does by itself)."""
    gc.collect()
    return len(gc.get_objects())


def test_the_native_untrack_is_built_and_an_untracked_object_is_still_freed_when_unused() -> None:
    from strongroom import _collector  # the project's build makes it (`make`)

    key = subject_key("c-1")
    assert gc.is_tracked(key)
    assert untracked(key) is key
    assert not gc.is_tracked(key)
    assert _collector.untrack(5) == 5  # objects the collector never tracks pass through
    gone = weakref.ref(key)
    del key
    assert gone() is None  # reference counting frees it: no collector pass needed


def test_a_producers_sealers_add_no_tracked_object_per_subject(quiet_collector: None) -> None:
    keys = {f"c-{i}": subject_key(f"c-{i}") for i in range(SUBJECTS)}
    items = [SealItem("orders.enc", AadProfile.TOPIC, s, s.encode(), b"v") for s in keys]
    sealers = SubjectSealers()
    before = tracked_now()
    sealers.seal(items, keys, sealers.notices())
    del items
    assert len(sealers) == SUBJECTS
    assert not gc.is_tracked(sealers._entries)
    assert tracked_now() - before < 50  # was 2 a subject: the sealer and its (topic, profile, subject) slot
    sealers.on_erasure(ErasureNotice(subjects=("c-1",)))  # the cache still empties on an erasure
    assert len(sealers) == 0


class Manager:
    """What :class:`KeyCache` asks of its key manager: keys for the subjects it misses, charged as they are."""

    def __init__(self) -> None:
        self.table = SimpleNamespace(follower=SimpleNamespace(check_alive=lambda: None))

    def get_or_create(self, subjects: Sequence[str]) -> dict[str, SubjectKey]:
        return {s: subject_key(s) for s in subjects}

    def charge(self, keys: dict[str, Any], seals: dict[str, int]) -> dict[str, Any]:
        return keys


def test_a_producers_key_cache_adds_no_tracked_object_per_subject(quiet_collector: None) -> None:
    cache = KeyCache(Manager(), listen=False)  # type: ignore[arg-type]
    subjects = [f"c-{i}" for i in range(SUBJECTS)]
    before = tracked_now()
    got = cache.get_or_create(subjects)
    del got
    assert len(cache) == SUBJECTS
    assert not gc.is_tracked(cache._entries)
    assert tracked_now() - before < 50  # was 2 a subject: the key and its (key, expiry) entry
    key = cache.cached("c-7")
    assert isinstance(key, SubjectKey)
    cache.on_erasure(ErasureNotice(subjects=("c-7",)))
    assert cache.cached("c-7") is None


def test_the_key_tables_caches_are_out_of_the_passes() -> None:
    """(The store's lease states: tests/unit/keys/test_key_table_parts.py, with the follower that fills them; a
    consumer's ready ciphers and openers: tests/unit/clients/test_client_batch_paths.py.)"""
    lru = _Lru(10)
    lru.put(b"k" * 16, "c-1", os.urandom(32))
    assert not gc.is_tracked(lru.entries)
    ledger = SealLedger(SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5))
    assert not gc.is_tracked(ledger._balance)
