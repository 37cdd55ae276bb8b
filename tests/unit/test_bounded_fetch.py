"""Readers that bound librdkafka's pre-fetch queue must not also keep its one-second fetch back-off.

After a fetch that filled the local queue, librdkafka waits ``fetch.queue.backoff.ms`` (1000 ms by
default) before fetching that partition again, even when the reader empties the queue long before. A
bounded key table spent most of a cold catch-up waiting there (25k records/s; 55k/s with 10 ms).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from strongroom.audit.kafka_reader import READER_DEFAULTS
from strongroom.keys.follower import _BOUNDED_FETCH

LIBRDKAFKA_DEFAULT_BACKOFF_MS = 1000


@pytest.mark.parametrize(("name", "conf"), [("key table", _BOUNDED_FETCH), ("audit reader", READER_DEFAULTS)])
def test_a_bounded_prefetch_fetches_again_without_the_default_back_off(name: str, conf: Mapping[str, Any]) -> None:
    bounded = {"queued.min.messages", "queued.max.messages.kbytes"} & set(conf)
    assert bounded, f"the {name} does not bound librdkafka's pre-fetch any more: revisit this test"
    backoff = int(conf.get("fetch.queue.backoff.ms", LIBRDKAFKA_DEFAULT_BACKOFF_MS))
    assert backoff <= int(conf.get("fetch.wait.max.ms", 500)), f"the {name} idles {backoff} ms after a full queue"
