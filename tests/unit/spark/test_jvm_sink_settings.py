"""The JVM engine's settings document (``strongroom.spark.jvm_sink``): the Python sink's ids, the rule's
decisions as plain values, no key; and what the JVM engine refuses before a query starts."""

from __future__ import annotations

import json

import pytest

from strongroom.policies import Engine
from strongroom.rules import EncryptionRules
from strongroom.spark.jvm_sink import encrypt_settings, unsupported
from strongroom.spark.kafka_sink import TransactionalSinkConfig

SERVICE = {"host": "127.0.0.1", "port": 4242, "token": "ab" * 32, "cert": "-----BEGIN CERTIFICATE-----"}


def _rules() -> EncryptionRules:
    return EncryptionRules.parse_obj_or_fail(
        {
            "rules": [
                {"topic": "orders", "subject": {"source": "header", "header": "tenant"}, "on_reject": "dead-letter"},
                {"topic": "pay.*", "pattern": True, "aad_profile": "portable", "output_topic": "$(topic).sealed"},
            ]
        }
    )


def test_the_settings_carry_the_python_sinks_ids_and_the_rules_decisions() -> None:
    config = TransactionalSinkConfig("broker:9092", "app-1", {"security.protocol": "PLAINTEXT"})
    document = json.loads(
        encrypt_settings(
            config, _rules(), {"orders": "orders.enc", "payments": "payments.sealed"}, {"orders.enc": 500}, "dlq",
            SERVICE,
        )
    )  # fmt: skip
    assert document["group_id"] == config.group_id == "strongroom-app-1"
    # The JVM appends "<topic>-<partition>": the same transactional id the Python sink uses.
    assert document["transactional_id_prefix"] + "orders-3" == config.transactional_id("orders", 3)
    assert document["client_properties"] == {"security.protocol": "PLAINTEXT"}
    assert document["topics"]["orders"] == {
        "bound_topic": "orders",
        "rule_index": 0,
        "output": "orders.enc",
        "subject_source": "header",
        "subject_header": "tenant",
        "subject_path": "",
        "subject_where": "header 'tenant'",
        "max_subject_bytes": 4096,
        "profile": "topic",
        "dead_letter": True,
        "fields": [],
        "mode": "value",
    }
    assert document["topics"]["payments"]["profile"] == "portable"
    assert document["topics"]["payments"]["rule_index"] == 1
    assert document["topics"]["payments"]["dead_letter"] is False
    assert document["limits"] == {"orders.enc": 500}
    assert document["dead_letter_topic"] == "dlq"
    assert set(document) == {
        "kind", "bootstrap_servers", "client_properties", "group_id", "transactional_id_prefix",
        "transaction_timeout_ms", "service", "dead_letter_topic", "default_limit", "limits", "topics", "chunk_rows",
    }  # fmt: skip
    assert not any("dek" in name.lower() or "key_id" in name.lower() for name in document)


@pytest.mark.parametrize(
    ("kind", "problem"),
    [("encrypt", None), ("decrypt", None), ("audit", "the JVM engine does not run the audit pipeline")],
)
def test_what_the_jvm_engine_does_not_run_is_named(kind: str, problem: str | None) -> None:
    assert unsupported(kind) == problem


def test_the_engine_option_takes_the_plain_words() -> None:
    assert Engine("jvm") is Engine.JVM
    assert Engine("python") is Engine.PYTHON
