"""Erasure reaches the keys an idle encrypt driver holds in memory (its KeyCache and cipher cache)."""

from __future__ import annotations

import time

import pytest

from strongroom.crypto.aead import CIPHERS
from strongroom.envelope import SubjectErased
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, erase
from strongroom.keys.cache import KeyCache
from strongroom.keys.erasure_feed import ErasureFeed
from strongroom.kms.metered import MeteredKms


def test_an_idle_encrypt_driver_drops_an_erased_key_without_a_request(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    options = {"readers_topic": readers_topic, "heartbeat_interval": 1.0}
    with KeyManager(client, kms, topic=keys_topic, table_options=options) as manager:
        cache = KeyCache(manager)
        feed = ErasureFeed()
        manager.table.add_erasure_listener(feed)
        keys = cache.get_or_create(["alice", "bob"])
        alice, bob = keys["alice"], keys["bob"]
        assert isinstance(alice, SubjectKey)
        assert isinstance(bob, SubjectKey)
        CIPHERS.get(alice.key)  # the driver sealed with it (the cipher cache holds the key now)
        assert cache.cached("alice") == alice
        calls = cache.counters["manager_calls"]

        erase(client, ["alice"], reason="idle driver test", topic=keys_topic)
        deadline = time.monotonic() + 10
        while cache.cached("alice") is not None:  # no get_or_create: the driver is idle
            assert time.monotonic() < deadline, "the idle driver's cache still holds the erased key"
            time.sleep(0.02)

        assert CIPHERS.peek(alice.key) is None  # its cipher is gone too
        assert cache.cached("bob") == bob  # nobody else's key was dropped
        assert cache.counters["manager_calls"] == calls
        assert cache.stats()["cache_erased_dropped"] == 1
        delta = feed.since(0)  # what the key service tells executors that saw generation 0
        assert alice.key_id in delta.key_ids
        assert bob.key_id not in delta.key_ids
        assert not delta.reset


def test_keys_read_just_before_an_erasure_are_not_cached_after_it(
    client: ClientConfig, keys_topic: str, kms: MeteredKms
) -> None:
    """The key table warms keys from rows it has read (a batch's subject states); an erasure applied
    between that read and the cache insert must win: the table's eviction count moved, so it reads again
    which keys are still stored and caches only those."""
    with KeyManager(client, kms, topic=keys_topic, table_options={"register": False}) as manager:
        manager.get_or_create(["carol", "dave"])
    with KeyTable(client, kms, topic=keys_topic, register=False) as reader:  # nothing cached yet
        reader.wait_caught_up(30)
        seen = reader._evictions
        rows = reader.store.live_keys_many(["carol", "dave"])  # read before the erasure
        (carol,), (dave,) = rows["carol"], rows["dave"]

        erase(client, ["carol"], reason="warm race test", topic=keys_topic)
        deadline = time.monotonic() + 10
        while reader.store.key(carol.key_id) is not None or reader._evictions == seen:
            assert time.monotonic() < deadline, "the reader did not apply the erasure"
            time.sleep(0.02)

        assert reader._warm_stored([carol, dave], seen) == 1  # the rows read before the erasure
        with pytest.raises(SubjectErased):
            reader.lookup(carol.key_id)
        assert reader.lookup(dave.key_id) is not None
