"""Row layouts shared by the Kafka data source, the ledger, the scrub and the report.

One row layout serves both the ledger (what was captured) and the scrub's view of the current log
(what is there now), so the two are compared column by column.

``kind`` tells a record row from a *range marker*: for every offset range a reader finished, it
emits one marker row (``offset`` = first offset actually readable, ``range_end`` = exclusive end,
``range_records``/``range_bytes`` = records and key+value bytes read),
so "read and found nothing" (compaction, transaction markers, aborted data) is distinguishable from
"never read" - the ledger's coverage. Record rows leave ``range_end`` null; markers leave the
record columns null, records leave the ``range_*`` columns null. With ``emitDigests`` the reader also
emits ``kind=digest`` rows - the chunk digests of :mod:`strongroom.audit.digest` of exactly the
records it read (``chunk``, ``digest_*``, ``range_records`` = records, ``offset``..``range_end`` their
offsets) - so a scrub never has to hash the ledger again.

Times are epoch milliseconds (``BIGINT``) as Kafka keeps them; ``timestamp_type`` is Kafka's
(0 none, 1 CreateTime, 2 LogAppendTime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

KIND_RECORD = "record"
KIND_RANGE = "range"
KIND_DIGEST = "digest"
#: Rows that are records (captured, or from producer delivery reports).
RECORD_KINDS = (KIND_RECORD, "delivery")

#: Spark DDL of rows produced by the ``strongroom-kafka`` data source (and stored in the ledger).
LOG_ROWS_DDL = (
    "topic STRING, partition INT, offset BIGINT, leader_epoch INT, timestamp BIGINT, timestamp_type TINYINT, "
    "key_hash BINARY, value_hash BINARY, headers_hash BINARY, key_len INT, value_len INT, "
    "read_at BIGINT, kind STRING, range_end BIGINT, range_records BIGINT, range_bytes BIGINT, "
    "chunk BIGINT, digest_xor BIGINT, digest_lo BIGINT, digest_hi BIGINT"
)

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("timestamp", pa.int64()),
        ("timestamp_type", pa.int8()),
        ("key_hash", pa.binary()),
        ("value_hash", pa.binary()),
        ("headers_hash", pa.binary()),
        ("key_len", pa.int32()),
        ("value_len", pa.int32()),
        ("read_at", pa.int64()),
        ("kind", pa.string()),
        ("range_end", pa.int64()),
        ("range_records", pa.int64()),
        ("range_bytes", pa.int64()),
        ("chunk", pa.int64()),
        ("digest_xor", pa.int64()),
        ("digest_lo", pa.int64()),
        ("digest_hi", pa.int64()),
    ]
)

COLUMNS: list[str] = ARROW_SCHEMA.names


def spark_schema() -> StructType:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(LOG_ROWS_DDL)
    assert isinstance(schema, StructType)
    return schema
