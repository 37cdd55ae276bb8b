"""Encryption rules validate themselves with messages that name the problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strongroom.envelope.ids import AadProfile
from strongroom.errors import ConfigError
from strongroom.policies import MissingKek
from strongroom.rules import EncryptionRules


def test_rule_matching_and_output_topic() -> None:
    rules = EncryptionRules.parse_obj_or_fail(
        {
            "rules": [
                {"topic": "customer-events", "mode": "fields", "fields": ["$.name", "$.email"]},
                {"topic": "orders-.*", "pattern": True, "output_topic": "enc.$(topic)", "aad_profile": "portable"},
            ]
        }
    )
    assert rules.rule_for("customer-events").fields == ("$.name", "$.email")
    assert rules.rule_for("customer-events").output_for("customer-events") == "customer-events.enc"
    rule = rules.rule_for("orders-eu")
    assert rule.output_for("orders-eu") == "enc.orders-eu"
    assert rule.profile == AadProfile.PORTABLE
    assert rules.subscription() == {"subscribePattern": r"customer\-events|orders-.*"}
    with pytest.raises(ConfigError, match="no encryption rule matches topic 'payments'"):
        rules.rule_for("payments")


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"topic": "t", "mode": "fields"}, "lists no fields"),
        ({"topic": "t", "fields": ["$.a"]}, "use mode: fields"),
        ({"topic": "t", "subject": {"source": "json", "path": "$.id"}}, "readers could not find the subject"),
        (
            {
                "topic": "t",
                "mode": "fields",
                "fields": ["$.customer"],
                "subject": {"source": "json", "path": "$.customer.id"},
            },
            "holds the subject",
        ),
        ({"topic": "t", "subject": {"source": "json", "path": "customer"}}, "dotted JSON path"),
        ({"topic": "t", "subject": {"source": "header"}}, "needs the header name"),
        ({"topic": "t(", "pattern": True}, "not a valid regular expression"),
        ({"topic": "t", "mode": "fields", "fields": ["name"]}, "name"),
        ({"topic": "t", "on_reject": "plaintext"}, "on_reject"),
        ({"topic": "t", "typo": 1}, "typo"),
    ],
)
def test_invalid_rules_are_clear(rule: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="invalid encryption rules") as err:
        EncryptionRules.parse_obj_or_fail({"rules": [rule]})
    assert message in str(err.value)


def test_rules_file_json_and_yaml(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"rules": [{"topic": "a"}]}')
    (tmp_path / "r.yaml").write_text("rules:\n  - topic: b\n    subject: {source: header, header: user}\n")
    (tmp_path / "bad.yaml").write_text("rules: [")
    assert EncryptionRules.load(tmp_path / "r.json").rule_for("a").subject.source == "key"
    assert EncryptionRules.load(tmp_path / "r.yaml").rule_for("b").subject.header == "user"
    with pytest.raises(ConfigError, match="cannot parse rules file"):
        EncryptionRules.load(tmp_path / "bad.yaml")


def test_a_rule_names_its_kek_template_kms_and_missing_kek_policy() -> None:
    rules = EncryptionRules.parse_obj_or_fail(
        {
            "rules": [
                {"topic": "orders-.*", "pattern": True, "kek": "pii-$(topic)", "kms": "eu-vault"},
                {"topic": "payments", "missing_kek": "create"},
            ]
        }
    )
    orders = rules.rule_for("orders-eu")
    assert orders.kek_alias_for("orders-eu", "strongroom-subjects") == "pii-orders-eu"
    assert orders.kms == "eu-vault"
    assert orders.missing_kek is MissingKek.FAIL
    payments = rules.rule_for("payments")
    assert payments.kek_alias_for("payments", "strongroom-subjects") == "strongroom-subjects"
    assert payments.missing_kek is MissingKek.CREATE
    assert rules.kms_names() == {"eu-vault"}
    assert rules.exact_topics() == ["payments"]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"topic": "t", "kek": "pii-$(partition)"}, "only placeholder is $(topic)"),
        ({"topic": "t", "kek": "  "}, "KEK template"),
        ({"topic": "t", "kms": "a b"}, "kms"),
        ({"topic": "t", "missing_kek": "passthrough"}, "missing_kek"),
    ],
)
def test_bad_kek_settings_are_refused(rule: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="invalid encryption rules") as err:
        EncryptionRules.parse_obj_or_fail({"rules": [rule]})
    assert message in str(err.value)


def test_the_rules_file_kms_section_never_enters_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "kms:\n  bao: {provider: vault, address: 'http://127.0.0.1:8200', token: s3cr3t-token}\n"
        "rules:\n  - {topic: orders, kms: bao, kek: 'pii-$(topic)'}\n"
    )
    rules = EncryptionRules.load(path)
    assert rules.rule_for("orders").kms == "bao"
    assert "s3cr3t" not in rules.model_dump_json()
    assert "s3cr3t" not in repr(rules)


@pytest.mark.parametrize(
    ("rule", "outputs", "dead_letter", "problem"),
    [
        ({"topic": "orders-.*", "pattern": True}, {"orders-eu": "orders-eu.enc"}, None,
         "the rule for 'orders-.*' matches 'orders-eu.enc', the output topic of 'orders-eu'"),
        ({"topic": "orders"}, {"orders": "orders"}, None, "the rule for 'orders' matches 'orders', the output topic"),
        ({"topic": "orders-.*", "pattern": True}, {}, "orders-rejected",
         "the rule for 'orders-.*' matches 'orders-rejected', the dead-letter topic"),
    ],
)  # fmt: skip
def test_rules_that_would_read_what_the_pipeline_writes_are_refused(
    rule: dict[str, Any], outputs: dict[str, str], dead_letter: str | None, problem: str
) -> None:
    rules = EncryptionRules.parse_obj_or_fail({"rules": [rule]})
    with pytest.raises(ConfigError) as err:
        rules.refuse_own_output(outputs, dead_letter)
    assert err.value.problem.startswith(problem)
    assert "orders-[a-z]+" in err.value.hint


def test_outputs_and_dead_letters_the_rules_do_not_read_are_fine() -> None:
    rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "orders-[a-z]+", "pattern": True}]})
    rules.refuse_own_output({"orders-eu": "orders-eu.enc", "orders-us": "orders-us.enc"}, "orders.rejected")
