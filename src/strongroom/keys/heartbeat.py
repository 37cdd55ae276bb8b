"""A key reader's heartbeat in the readers registry: what `erasure status` reads to know that every
running reader has applied an erasure marker (see :mod:`strongroom.keys.readers`).

The constructor does no I/O; the first :meth:`ReaderHeartbeats.send` creates the registry topic if
needed and the producer. A registry problem never stops key reading: it is counted, logged once, and
shown in the key table's stats (erasures such a reader holds cannot be verified).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import new_producer
from strongroom.keys.readers import ReaderHeartbeat
from strongroom.keys.topic import create_readers_topic
from strongroom.runtime import now_ms

log = logging.getLogger(__name__)


def new_reader_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class ReaderHeartbeats:
    """Publishes one reader's heartbeats (every ``interval`` seconds, and when asked)."""

    def __init__(
        self,
        client: ClientConfig,
        *,
        readers_topic: str,
        keys_topic: str,
        reader_id: str,
        interval: float,
        enabled: bool = True,
    ) -> None:
        self.client = client
        self.readers_topic = readers_topic
        self.keys_topic = keys_topic
        self.reader_id = reader_id
        self.interval = interval
        self.enabled = enabled
        self.started_ms = now_ms()
        self.error: str | None = None
        self.errors = 0
        self._producer: Any = None
        self._last = -math.inf  # never sent: due at once (monotonic time may start near zero at boot)

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.interval

    def send(
        self,
        *,
        store: str,
        persistent: bool,
        applied: Mapping[int, int],
        caught_up: bool,
        closed: bool = False,
        flush: bool = False,
    ) -> None:
        """Publish the reader's state now (``flush``: and wait until the registry has it)."""
        self._last = time.monotonic()
        if not self.enabled:
            return
        try:
            if self._producer is None:
                create_readers_topic(self.client, self.readers_topic)
                self._producer = new_producer(self.client, {"linger.ms": 0, "log_level": 0})
            heartbeat = ReaderHeartbeat(
                reader_id=self.reader_id,
                keys_topic=self.keys_topic,
                host=socket.gethostname(),
                pid=os.getpid(),
                persistent=persistent,
                store=store,
                started_ms=self.started_ms,
                last_seen_ms=now_ms(),
                interval_ms=int(self.interval * 1000),
                applied=dict(applied),
                caught_up=caught_up,
                closed=closed,
            )
            self._producer.produce(
                self.readers_topic,
                key=self.reader_id.encode("utf-8"),
                value=heartbeat.to_bytes(),
                on_delivery=self._delivered,
            )
            self._producer.poll(0)
            if flush:
                self._producer.flush(10)
        except Exception as exc:  # noqa: BLE001 - a registry problem must not stop key reading
            self._delivered(exc, None)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.error = None
            return
        self.errors += 1
        if self.error is None:
            log.warning(
                "key reader %s cannot publish its heartbeat to %s (%s): erasures it holds cannot be verified",
                self.reader_id,
                self.readers_topic,
                err,
            )
        self.error = str(err)
