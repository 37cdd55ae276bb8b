"""Erasure reaches the keys an idle encrypt driver holds in memory (its KeyCache and cipher cache)."""

from __future__ import annotations

import time

from strongroom.crypto.aead import CIPHERS
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, SubjectKey, erase
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
