"""A topic read to its end, as the integration tests read their outputs: every record, in partition and
offset order, returned as soon as each partition is read to its high watermark instead of after a fixed
quiet period."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, TopicPartition

from strongroom.kafka.transport import build_consumer

if TYPE_CHECKING:
    from confluent_kafka import Message

    from strongroom.kafka.config import ClientConfig


def read_to_end(
    client: ClientConfig, topic: str, partitions: int | None = None, idle: float = 3.0, *, uncommitted: bool = False
) -> list[Message]:
    """Every committed record of ``topic`` (read_committed; ``uncommitted``: aborted ones too), in
    partition/offset order.

    Returns as soon as every partition is read to its high watermark. A partition whose end stays short of
    it (a transaction still open, or its markers not yet written) is waited for until no record has come
    for ``idle`` seconds."""
    isolation = "read_uncommitted" if uncommitted else "read_committed"
    consumer = build_consumer(client.consumer(overrides={"isolation.level": isolation, "enable.partition.eof": True}))
    try:
        if partitions is None:
            partitions = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        at_end: set[int] = set()
        last = time.monotonic()
        while len(at_end) < partitions and time.monotonic() - last < idle:
            msg = consumer.poll(0.3)
            if msg is None:
                continue
            error, partition, offset = msg.error(), msg.partition() or 0, msg.offset() or 0
            if error is None:
                out.append(msg)
                at_end.discard(partition)
                last = time.monotonic()
            elif error.code() == KafkaError._PARTITION_EOF:
                # the end a read_committed reader reaches is the last stable offset; only at the high
                # watermark (read from the fetch that ended here) is nothing left to come
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
                if offset >= high:
                    at_end.add(partition)
    finally:
        consumer.close()
    return sorted(out, key=lambda m: (m.partition(), m.offset()))
