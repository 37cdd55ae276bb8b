"""An executor process forgets erased keys (and their ciphers) from the key service's answers."""

from __future__ import annotations

from typing import Any

import pytest

from strongroom.crypto.aead import CIPHERS
from strongroom.keys.erasure_feed import ErasureFeed, ErasureNotice
from strongroom.spark.executor_keys import EXECUTOR_KEYS, ExecutorKeys
from strongroom.spark.keyservice import KeyService, KeyServiceClient, b64

KEYS = {b"1" * 16: bytes(range(32)), b"2" * 16: bytes(range(1, 33))}


def test_follow_forgets_erased_keys_and_their_ciphers() -> None:
    memory = ExecutorKeys()
    memory.remember("svc", KEYS.items())
    for dek in KEYS.values():
        CIPHERS.get(dek)
    assert memory.follow("svc", 1, [b"1" * 16, b"9" * 16], reset=False) == 1
    assert CIPHERS.peek(KEYS[b"1" * 16]) is None
    assert CIPHERS.peek(KEYS[b"2" * 16]) is not None
    assert not memory.holds(b"1" * 16)
    assert memory.holds(b"2" * 16)
    assert memory.generation("svc") == 1
    assert memory.follow("svc", 2, [], reset=True) == 1
    assert len(memory) == 0
    assert CIPHERS.peek(KEYS[b"2" * 16]) is None


def test_a_new_service_drops_the_keys_of_services_that_no_longer_report() -> None:
    memory = ExecutorKeys()
    memory.remember("old", [(b"1" * 16, KEYS[b"1" * 16])])
    memory.follow("old", 0, [], reset=False)
    memory.follow("new", 0, [], reset=False)
    assert not memory.holds(b"1" * 16)


def test_eviction_drops_the_cipher_too() -> None:
    memory = ExecutorKeys(capacity=1)
    memory.remember("svc", KEYS.items())
    CIPHERS.get(KEYS[b"1" * 16])
    memory.remember("svc", [(b"2" * 16, KEYS[b"2" * 16])])
    assert not memory.holds(b"1" * 16)


@pytest.fixture
def feed_service() -> Any:
    feed = ErasureFeed()

    def handler(op: str, args: dict[str, Any]) -> Any:
        return {kid.hex(): b64(dek) for kid, dek in KEYS.items()}

    service = KeyService(handler, erasures=feed)
    yield service, feed
    service.close()


def test_answers_carry_the_erasures_since_the_last_answer(feed_service: Any) -> None:
    service, feed = feed_service
    client = KeyServiceClient(service.client_spec())
    client.call("keys")
    client.remember(list(KEYS.items()))
    for dek in KEYS.values():
        CIPHERS.get(dek)
    feed(ErasureNotice((b"1" * 16,), ("alice",)))
    client.call("keys")  # the next batch's request: the erased key is gone before it is answered
    assert not EXECUTOR_KEYS.holds(b"1" * 16)
    assert CIPHERS.peek(KEYS[b"1" * 16]) is None
    assert EXECUTOR_KEYS.holds(b"2" * 16)
    assert EXECUTOR_KEYS.generation(client.service_id) == 1
