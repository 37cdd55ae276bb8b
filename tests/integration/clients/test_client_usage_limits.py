"""The client library charges its keys' usage limits one seal per sealed value: every record of a batch
counts (not one per subject), and each field a field-mode record seals counts on its own, since each is
sealed under its own nonce. So a busy subject rotates at the bound however its records are batched."""

from __future__ import annotations

import base64
import json
from collections import Counter

import pytest
from client_kit import ClientEnv

from strongroom.clients.producer import ProduceOutcome, ProducerRecord
from strongroom.envelope.codec import parse
from strongroom.envelope.ids import FIELD_PREFIX
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.keys.usage import SubjectKeyLimits

LIMITS = SubjectKeyLimits(max_seals=300, lease_seals=40, creator_seals=40, slot_window=0)


def key_id_of(envelope: bytes) -> bytes:
    ref = parse(envelope).key_ref
    assert isinstance(ref, SubjectKeyRef)
    return ref.key_id


def sealed_per_key(client_env: ClientEnv, topic: str, expect: int, mode: str) -> Counter[bytes]:
    """How many values each subject key sealed in the output topic."""
    per_key: Counter[bytes] = Counter()
    for msg in client_env.read_raw(f"{topic}.enc", expect):
        if mode == "value":
            per_key[key_id_of(msg.value())] += 1
            continue
        document = json.loads(msg.value())
        texts = [document["email"], document["name"], *document["cards"]]
        for text in texts:
            assert text.startswith(FIELD_PREFIX)
            per_key[key_id_of(base64.b64decode(text[len(FIELD_PREFIX) :]))] += 1
    return per_key


@pytest.mark.parametrize(
    ("mode", "fields", "values_per_record"),
    [
        ("value", None, 1),
        ("fields", ["$.email", "$.name"], 2),  # a fixed number of values per record
        ("fields", ["$.email", "$.name", "$.cards[*]"], 5),  # three cards: counted in the record
    ],
)
def test_a_busy_subject_rotates_at_its_seal_bound_counting_every_sealed_value(
    client_env: ClientEnv, mode: str, fields: list[str] | None, values_per_record: int
) -> None:
    topic = client_env.new_topic(partitions=1)
    rule = {"topic": topic, "mode": mode, **({"fields": fields} if fields else {})}
    producer = client_env.producer({"rules": [rule]}, client_env.key_manager(limits=LIMITS))
    cards = ["4111", "5500", "3400"] if values_per_record == 5 else []
    records = 0
    for batch in range(8):  # the batch path, all of one subject
        values = [
            json.dumps({"email": f"t{batch}-{i}@example.com", "name": "Tenant", "cards": cards}).encode()
            for i in range(50)
        ]
        outcomes = producer.produce_batch([ProducerRecord(topic, v, key=b"tenant-1") for v in values])
        assert outcomes == [ProduceOutcome.ENCRYPTED] * 50
        records += 50
    # the per-record path too: a caller's header takes records off the batch path
    values = [json.dumps({"email": f"h{i}@example.com", "name": "Tenant", "cards": cards}).encode() for i in range(50)]
    outcomes = producer.produce_batch(
        [ProducerRecord(topic, v, key=b"tenant-1", headers=[("trace", b"1")]) for v in values]
    )
    assert outcomes == [ProduceOutcome.ENCRYPTED] * 50
    records += 50
    producer.flush(30)

    per_key = sealed_per_key(client_env, topic, records, "value" if mode == "value" else "fields")
    assert sum(per_key.values()) == records * values_per_record
    assert max(per_key.values()) <= LIMITS.bound, (
        f"a key sealed {max(per_key.values())} values under a bound of {LIMITS.bound}"
    )
    # 450 records x values each, a bound of 340 values per key: at least this many keys
    assert len(per_key) >= -(-records * values_per_record // LIMITS.bound)
