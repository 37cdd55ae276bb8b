"""Which KMS settings a pipeline command runs with: the command's, the rules file's named ones, or both."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from strongroom.cli.pipelines import PipelineOptions, RuleOptions
from strongroom.errors import ConfigError
from strongroom.rules import EncryptionRules

RULES = """
kms:
  bao: {provider: vault, address: "http://127.0.0.1:8200", token: s3cr3t}
rules:
  - {topic: orders, kek: "pii-$(topic)", kms: bao}
"""


def _options(**overrides: object) -> PipelineOptions:
    names = [f.name for f in dataclasses.fields(PipelineOptions)]
    values: dict[str, object] = dict.fromkeys(names)
    values.update(keys_topic="strongroom-keys", starting_offsets="earliest", continuous=False, trigger_seconds=5.0,
                  on_input_gap="report", allow_unencrypted_spark_channel=False, engine="jvm", spark_conf=(),
                  metrics_host="127.0.0.1", bootstrap="127.0.0.1:9092")  # fmt: skip
    values.update(overrides)
    return PipelineOptions(**values)  # type: ignore[arg-type]


def _rule_options(path: Path) -> RuleOptions:
    return RuleOptions(rules_file=str(path), topics=(), subject="key", fields=None, aad_profile="topic")


def test_rules_that_each_name_a_kms_need_no_command_kms(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    rule_options = _rule_options(path)
    settings = _options().settings("encrypt", rule_options.rules(), rule_options.kms_catalog())
    assert settings.kms == {}
    assert settings.kmses["bao"]["provider"] == "vault"
    assert "s3cr3t" not in repr(settings)


def test_a_rule_without_a_kms_still_needs_the_command_kms(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES + "  - {topic: payments}\n")
    rule_options = _rule_options(path)
    with pytest.raises(ConfigError, match="needs the KMS that holds the KEKs"):
        _options().settings("encrypt", rule_options.rules(), rule_options.kms_catalog())
    settings = _options(local_kms=str(tmp_path / "ring.json")).settings(
        "encrypt", rule_options.rules(), rule_options.kms_catalog()
    )
    assert settings.kms == {"provider": "local", "path": str(tmp_path / "ring.json")}


def test_a_reader_needs_no_command_kms_when_the_rules_file_names_kmses(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES.replace('- {topic: orders, kek: "pii-$(topic)", kms: bao}', "- {topic: orders.enc}"))
    rule_options = _rule_options(path)
    assert rule_options.rules().rule_for("orders.enc").kms is None
    settings = _options().settings("decrypt", rule_options.rules(), rule_options.kms_catalog())
    assert settings.kms == {}
    assert set(settings.kmses) == {"bao"}
    with pytest.raises(ConfigError, match="needs the KMS that holds the KEKs"):
        _options().settings("encrypt", rule_options.rules(), rule_options.kms_catalog())


def test_a_rules_file_naming_an_undefined_kms_is_refused_before_anything_runs() -> None:
    from strongroom.keys.router import KeyRouter

    rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "orders", "kms": "nowhere"}]})
    with pytest.raises(ConfigError, match=r"'nowhere'.*does not define"):
        KeyRouter(None, None, rules=rules, kmses={})
