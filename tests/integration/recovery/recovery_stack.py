"""Helpers of the recovery integration tests: produce real encrypted records, commit group offsets, run the CLI."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from strongroom.cli.main import main
from strongroom.crypto.limits import DekUsagePolicy
from strongroom.envelope import RecordContext, ValueMode, marker_header
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.api import Kms
from strongroom.kms.envelope_keys import RotatingDekSource
from strongroom.kms.vault import VaultKms

Headers = list[tuple[str, bytes | None]]
Record = tuple[Headers | None, bytes | None]


def vault(openbao: Any) -> tuple[VaultKms, VaultKekAdmin]:
    kms = VaultKms.from_config({"address": openbao.address, "token": openbao.token})
    return kms, VaultKekAdmin(openbao.client())


def new_kek(admin: VaultKekAdmin) -> str:
    return admin.create_kek("kek-" + uuid.uuid4().hex[:10])


def sealed(kms: Kms, kek: str, n: int, *, topic: str, per_dek: int = 50, first: int = 0) -> list[Record]:
    """``n`` WRAPPED_DEK records under ``kek`` (a new DEK every ``per_dek`` records)."""
    source = RotatingDekSource(kms, kek, DekUsagePolicy(max_encryptions=per_dek))
    out: list[Record] = []
    for i in range(first, first + n):
        value = source.seal(json.dumps({"n": i}).encode(), RecordContext(topic, f"k{i}".encode()))
        out.append(([marker_header(ValueMode.WHOLE_VALUE)], value))
    return out


def produce(bootstrap: str, topic: str, partition: int, records: Iterable[Record]) -> int:
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 20}))
    count = 0
    for i, (headers, value) in enumerate(records):
        producer.produce(topic, value=value, key=f"k{i}".encode(), headers=headers, partition=partition)
        count += 1
        if count % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return count


def produce_aborted(bootstrap: str, topic: str, partition: int, n: int) -> None:
    """``n`` records in a transaction that is aborted: offsets that read_committed readers never see."""
    overrides = {"transactional.id": "tx-" + uuid.uuid4().hex, "transaction.timeout.ms": 300_000}
    producer = build_producer(ClientConfig(bootstrap).producer(overrides))
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, value=b"aborted garbage", key=f"a{i}".encode(), partition=partition)
    producer.flush(30)
    producer.abort_transaction(30)


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = build_consumer(ClientConfig(bootstrap).consumer(group))
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def run_cli(capsys: pytest.CaptureFixture[str], args: Sequence[str]) -> tuple[int, Any, str]:
    """Run ``strongroom --output json ...`` in-process; returns (exit code, parsed stdout or None, stderr)."""
    capsys.readouterr()
    code = main(["--output", "json", *args])
    captured = capsys.readouterr()
    data = json.loads(captured.out) if captured.out.strip() else None
    return code, data, captured.err


def vault_args(openbao: Any) -> list[str]:
    return ["--kms", "vault", "--vault-address", openbao.address, "--kms-attempts", "2", "--kms-deadline", "5"]


def subject_key_record(key_id: bytes, dek: bytes, subject: bytes = b"alice", topic: str = "orders") -> Record:
    from strongroom.envelope import seal
    from strongroom.envelope.keyref import SubjectKeyRef

    value = seal(b'{"name": "Alice"}', dek, SubjectKeyRef(key_id), RecordContext(topic, subject))
    return [marker_header(ValueMode.WHOLE_VALUE)], value


def json_fields_record(kms: Any, kek_ids: Sequence[str], topic: str = "orders") -> Record:
    """A JSON-fields record with one encrypted field per KEK."""
    from strongroom.envelope.json_fields import encrypt_json_fields

    plain = b'{"a": "x", "b": "y", "c": 3}'
    merged = json.loads(plain)
    for field, kek_id in zip(("$.a", "$.b"), kek_ids, strict=False):
        # each KEK seals its own field of the plaintext; the sealed fields are merged into one record
        active = RotatingDekSource(kms, kek_id).current()
        sealed = encrypt_json_fields(plain, [field], active.dek, active.key_ref, RecordContext(topic, b"s1"))
        merged[field[2:]] = json.loads(sealed)[field[2:]]
    return [marker_header(ValueMode.JSON_FIELDS)], json.dumps(merged, separators=(",", ":")).encode()
