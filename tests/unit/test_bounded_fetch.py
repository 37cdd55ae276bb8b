"""Consumers must not keep librdkafka's one-second fetch back-off.

After a fetch that filled the local queue, librdkafka waits ``fetch.queue.backoff.ms`` (1000 ms by
default) before fetching that partition again, even when the reader empties the queue long before. A
bounded key table spent most of a cold catch-up waiting there (25k records/s; 55k/s with 10 ms), and a
decrypting consumer of 100,000 records of 1 KB (more than the default 64 MiB queue) read at half its rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from strongroom.audit.kafka_reader import READER_DEFAULTS
from strongroom.kafka.config import ClientConfig
from strongroom.keys.follower import _BOUNDED_FETCH

LIBRDKAFKA_DEFAULT_BACKOFF_MS = 1000


CLIENT = ClientConfig("127.0.0.1:9092")
#: The key table's reader as it is built (``new_consumer``: the client's consumer settings, then its own).
KEY_TABLE = CLIENT.consumer("strongroom-key-table", _BOUNDED_FETCH)


@pytest.mark.parametrize(("name", "conf"), [("key table", KEY_TABLE), ("audit reader", READER_DEFAULTS)])
def test_a_bounded_prefetch_fetches_again_without_the_default_back_off(name: str, conf: Mapping[str, Any]) -> None:
    bounded = {"queued.min.messages", "queued.max.messages.kbytes"} & set(conf)
    assert bounded, f"the {name} does not bound librdkafka's pre-fetch any more: revisit this test"
    _assert_refetches_soon(name, conf)


def test_every_consumer_strongroom_builds_fetches_again_soon() -> None:
    """The decrypting consumer, erasure checks and scans: librdkafka's default queue, not the default back-off."""
    _assert_refetches_soon("default consumer", CLIENT.consumer())
    _assert_refetches_soon("group consumer", CLIENT.consumer("app", {"fetch.wait.max.ms": 500}))


def _assert_refetches_soon(name: str, conf: Mapping[str, Any]) -> None:
    backoff = int(conf.get("fetch.queue.backoff.ms", LIBRDKAFKA_DEFAULT_BACKOFF_MS))
    assert backoff <= int(conf.get("fetch.wait.max.ms", 500)), f"the {name} idles {backoff} ms after a full queue"
