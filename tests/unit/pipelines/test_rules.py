"""Encryption rules validate themselves with messages that name the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.envelope.ids import AadProfile
from strongroom.errors import ConfigError
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
