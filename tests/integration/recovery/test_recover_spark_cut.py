"""The JVM cut (Spark SQL) and the Python cut agree on every record, garbage included.

Both formats are applied to one topic holding valid records of each, edge cases, and seeded random
garbage; for every offset the kind and the key prefixes must be byte-identical.
"""

from __future__ import annotations

import base64
import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from recovery_stack import Record, json_fields_record, produce, sealed, subject_key_record

from strongroom.envelope import ValueMode, marker_header
from strongroom.envelope.ids import RECORD_HEADER_NAME
from strongroom.kafka.config import ClientConfig
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.recovery import spark_jobs
from strongroom.recovery.formats import KroxyliciousFormat, StrongroomFormat
from strongroom.recovery.formats.base import RecordFormat
from strongroom.recovery.formats.kroxylicious import MARKER_HEADER, encode_record, vault_edek, write_uvarint
from strongroom.testing.schema_formats import sealed_avro_record, sealed_bytes_record

pytestmark = pytest.mark.integration


def corpus(tmp_path: Path) -> list[Record]:
    kms = LocalKms.from_config({"path": tmp_path / "keyring.json", "create": True})
    admin = LocalKeyringAdmin(kms.keyring)
    kek_a, kek_b = admin.create_kek("a"), admin.create_kek("b")
    records: list[Record] = []
    valid = sealed(kms, kek_a, 3, topic="orders")
    records += valid
    records.append(subject_key_record(os.urandom(16), os.urandom(32)))
    headers, document = json_fields_record(kms, [kek_a, kek_b])
    records += [(headers, document), (headers, document.replace(b"/", b"\\/"))]
    whole = [marker_header(ValueMode.WHOLE_VALUE)]
    json_marker = [marker_header(ValueMode.JSON_FIELDS)]
    schema_marker = [marker_header(ValueMode.SCHEMA_FIELDS)]
    envelope = valid[0][1]
    records += [(whole, envelope[:n]) for n in (0, 1, 3, 4, 6, 20, 40, len(envelope) - 29, len(envelope) - 28)]
    records += [
        (None, b"plain"), (None, None), ([("x", b"y")], b""), (whole, None), (whole, b""),
        ([(RECORD_HEADER_NAME, None)], b"v"), ([(RECORD_HEADER_NAME, b"\x01")], b"v"),
        ([(RECORD_HEADER_NAME, b"\x01\x09")], envelope), ([("a", b"b"), *whole], envelope),
        (json_marker, b'{"x": "sr1:"}'), (json_marker, b'{"x": "sr1:!!"}'), (json_marker, b"\xff\xfe not json"),
        (json_marker, b'{"x": "sr1:' + base64.b64encode(envelope[:30]) + b'"}'),
        sealed_avro_record(os.urandom(16), os.urandom(32)), (schema_marker, b"\x00\x00\x00\x00\x01\x02xy"),
        (schema_marker, b"\x00\x00\x00\x00\x01\x5csr1:" + b"A" * 40), (schema_marker, b"\xff\xfesr1:" + b"9QEB" * 7),
        (schema_marker, b"\x00\x01sr1:" + base64.b64encode(envelope)[:28] + b"\xe4sr1:" + b"9QEB" * 8),
    ]  # fmt: skip
    # Schema records whose only sealed fields are bytes: raw envelopes, found by their length fields.
    records += [
        sealed_bytes_record(kind, os.urandom(16), os.urandom(32), photo=os.urandom(size), thumb=b"t")
        for kind in ("avro", "protobuf")
        for size in (0, 60, 5000)
    ]
    inner = raw_envelope(os.urandom(16), bytes(28))
    records += [
        (schema_marker, b"\x00\x00\x00\x00\x02\xa2\x01" + raw_envelope(os.urandom(16), bytes(10) + b"\x62" + inner)),
        (schema_marker, b"\x00\x00\x00\x00\x02\x12\x31" + inner + b"\x62" + inner + b"\x78" + inner),
        (schema_marker, b"\x80\x80\x80\x80\x80\x62" + inner), (schema_marker, b"\x62\x80" + inner),
        (schema_marker, b"\x62" + raw_envelope(os.urandom(16), bytes(28), profile=3)), (schema_marker, inner),
    ]  # fmt: skip
    # Kroxylicious records: 1- and 2-byte EDEK lengths, truncations, bad markers.
    iv = os.urandom(12)
    inmemory = b"\x80\x0c" + iv + uuid.uuid4().bytes + os.urandom(48)
    for edek in (inmemory, vault_edek("KEK-orders", "vault:v2:" + "A" * 300)):
        headers, value = encode_record(b"order", os.urandom(32), edek, os.urandom(12))
        records += [(headers, value)] + [(headers, value[:n]) for n in (0, 1, 2, 3, len(edek) + 2, len(value) - 1)]
    krox = [(MARKER_HEADER, b"\x02")]
    records += [
        (krox, None), ([(MARKER_HEADER, b"\x01")], b"\x00" * 90), ([(MARKER_HEADER, b"")], b"\x00" * 90),
        ([(MARKER_HEADER, None)], b"\x00" * 90), (krox, b"\x00\xff\xff\xff\xff\x0f" + bytes(100)),
        (krox, b"\x00" + write_uvarint(3) + b"abc" + bytes(29)),
    ]  # fmt: skip
    rng = random.Random(20260101)
    markers = [
        None,
        whole,
        json_marker,
        schema_marker,
        krox,
        [(MARKER_HEADER, b"\x01")],
        [(RECORD_HEADER_NAME, b"\x01\x01\x00")],
    ]
    for _ in range(300):
        head = rng.choice(markers)
        size = rng.choice([0, 1, 2, 5, 9, 30, 64, 200, 2000])
        body = bytes(rng.randrange(256) for _ in range(size))
        if rng.random() < 0.4 and body:  # plausible starts: magic / kinds / short varints
            body = rng.choice([b"\xf5\x01\x01\x02", b"\xf5\x01\x01\x01", b"\x00\x05", b"\x00\x81\x01"]) + body
        records.append((head, rng.choice([body, None]) if rng.random() < 0.05 else body))
    for _ in range(200):  # schema records with raw-envelope look-alikes whose length fields fit or do not
        body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 30])))
        for _ in range(rng.choice([1, 2, 3])):
            rest = bytes(rng.randrange(256) for _ in range(rng.choice([28, 29, 60, 300])))
            shape = raw_envelope(bytes(rng.randrange(256) for _ in range(16)), rest, profile=rng.choice([0, 1, 2, 3]))
            stated = rng.choice([len(shape), len(shape) - 1, len(shape) + 40, 48, 49, rng.randrange(400)])
            body += write_uvarint(rng.choice([stated, 2 * stated])) + shape + bytes(rng.choice([0, 0, 3]))
        records.append((rng.choice([schema_marker, schema_marker, whole]), body))
    return records


def raw_envelope(key_id: bytes, body: bytes, profile: int = 1) -> bytes:
    """The shape of a raw subject-key envelope in a sealed bytes field (only its prefix is ever read)."""
    return b"\xf5\x01\x01\x01" + key_id + bytes((profile,)) + body


@pytest.mark.parametrize("fmt", [StrongroomFormat(), KroxyliciousFormat("vault")], ids=["strongroom", "kroxylicious"])
def test_spark_and_python_cut_every_record_alike(
    kafka_cluster: Any, spark: Any, new_topic: Any, tmp_path: Path, fmt: RecordFormat
) -> None:
    topic = new_topic(partitions=1)
    records = corpus(tmp_path)
    produce(kafka_cluster.bootstrap_servers, topic, 0, records)
    options = spark_jobs.kafka_source_options(ClientConfig(kafka_cluster.bootstrap_servers))
    frame = spark_jobs.with_key_prefixes(spark_jobs.read_partitions(spark, options, topic, {0: (0, len(records))}), fmt)
    rows = {r["offset"]: r for r in frame.collect()}
    assert len(rows) == len(records)
    mismatches = []
    for offset, (headers, value) in enumerate(records):
        expected = fmt.record_keys(headers, value)
        row = rows[offset]
        got_prefixes = tuple(bytes(p) for p in row["prefixes"]) if row["prefixes"] is not None else ()
        want_prefixes = expected.prefixes
        if row["kind"] != expected.kind.value or (row["kind"] == "encrypted" and got_prefixes != want_prefixes):
            mismatches.append((offset, headers, value[:16] if value else value, row["kind"], expected.kind.value))
    assert mismatches == []
