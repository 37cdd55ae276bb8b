"""Ledger rows from producer delivery reports: the capture closest to acknowledgement.

A tailing capture cannot see a record lost before it read it (acks=1 and a leader crash a moment
later). A producer that strongroom runs knows every record the moment the cluster acknowledges it;
:class:`DeliveryLedger` turns those acknowledgements into ledger rows - same hashes, same layout, the
leader epoch when librdkafka reports one - appended under ``<ledger>/deliveries`` as Parquet files
(``topic=<t>/kind=delivery/``). The scrub reads them with the captured rows; where both saw an
offset the first to record it wins, so a record acknowledged but never seen by the capture is still
audited.

    ledger = DeliveryLedger(LedgerPaths("/var/lib/strongroom/ledger"))
    producer.produce(topic, value, key, on_delivery=ledger.on_delivery)
    ...
    producer.flush(); ledger.flush()

Only local paths (or filesystems pyarrow knows) are supported; rows are buffered in memory and
written on :meth:`flush` (and every ``flush_every`` rows), each file written whole and renamed into
place so a reader never sees half a file.
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from strongroom.audit.hashing import record_hashes
from strongroom.audit.schema import ARROW_SCHEMA
from strongroom.audit.store import LedgerPaths
from strongroom.runtime import now_ms

KIND_DELIVERY = "delivery"
_FILE_SCHEMA = pa.schema([f for f in ARROW_SCHEMA if f.name not in ("topic", "kind")])


class DeliveryLedger:
    def __init__(self, ledger: LedgerPaths, *, flush_every: int = 50_000) -> None:
        self.ledger = ledger
        self.flush_every = flush_every
        self._rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()
        self.recorded = 0
        self.failed = 0

    def on_delivery(self, err: Any, msg: Any) -> None:
        """A confluent-kafka ``on_delivery`` callback: records every acknowledged message."""
        if err is not None:
            self.failed += 1
            return
        kh, vh, hh = record_hashes(msg.key(), msg.value(), msg.headers())
        ttype, ts = msg.timestamp()
        key, value = msg.key(), msg.value()
        row = {
            "partition": msg.partition(),
            "offset": msg.offset(),
            "leader_epoch": msg.leader_epoch(),
            "timestamp": ts,
            "timestamp_type": ttype,
            "key_hash": kh,
            "value_hash": vh,
            "headers_hash": hh,
            "key_len": None if key is None else len(key),
            "value_len": None if value is None else len(value),
            "read_at": now_ms(),
        }
        with self._lock:
            self._rows[msg.topic()].append(row)
            self.recorded += 1
            pending = sum(len(v) for v in self._rows.values())
        if pending >= self.flush_every:
            self.flush()

    def flush(self) -> int:
        """Write the buffered rows; returns how many were written."""
        with self._lock:
            rows, self._rows = self._rows, defaultdict(list)
        written = 0
        for topic, items in rows.items():
            if not items:
                continue
            directory = self.ledger.local(self.ledger.deliveries) / f"topic={topic}" / f"kind={KIND_DELIVERY}"
            directory.mkdir(parents=True, exist_ok=True)
            name = f"part-{now_ms()}-{uuid.uuid4().hex[:8]}.parquet"
            tmp = directory / f".{name}.tmp"
            pq.write_table(pa.Table.from_pylist(items, schema=_FILE_SCHEMA), tmp, compression="zstd")
            tmp.replace(directory / name)
            written += len(items)
        return written

    def __enter__(self) -> DeliveryLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
