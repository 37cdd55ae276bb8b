"""``--schema-registry``: the pipelines' registry, its credentials from the environment only, and a
schema-mode rule without one refused before anything runs."""

from __future__ import annotations

import pytest

from strongroom.cli.pipelines import REGISTRY_OUTAGE_WAIT_S, registry_settings
from strongroom.errors import ConfigError
from strongroom.rules import EncryptionRules
from strongroom.spark.schema_plans import SchemaPlans, require_registry


def test_no_url_means_no_registry() -> None:
    assert registry_settings(None) is None


def test_credentials_come_from_the_environment_and_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRONGROOM_SCHEMA_REGISTRY_USER", "svc")
    monkeypatch.setenv("STRONGROOM_SCHEMA_REGISTRY_PASSWORD", "pa55-w0rd")
    settings = registry_settings("http://registry:8080/apis/ccompat/v7")
    assert settings is not None
    assert settings.username == "svc"
    assert settings.password is not None
    assert settings.password.get_secret_value() == "pa55-w0rd"
    assert "pa55-w0rd" not in repr(settings)
    assert settings.outage_wait_s == REGISTRY_OUTAGE_WAIT_S  # waited out like a KMS outage


def test_a_bearer_token_alone_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("USER", "PASSWORD"):
        monkeypatch.delenv(f"STRONGROOM_SCHEMA_REGISTRY_{name}", raising=False)
    monkeypatch.setenv("STRONGROOM_SCHEMA_REGISTRY_TOKEN", "t0ken")
    settings = registry_settings("http://registry:8080/apis/ccompat/v7")
    assert settings is not None
    assert settings.bearer_token is not None
    assert settings.username is None


def test_a_schema_rule_without_a_registry_is_refused_naming_the_option() -> None:
    rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "a"}, {"topic": "b", "mode": "schema"}]})
    with pytest.raises(ConfigError, match="'b' is in schema mode") as refused:
        require_registry(rules, None)
    assert "--schema-registry" in (refused.value.hint or "")
    with pytest.raises(ConfigError):
        SchemaPlans(rules, None)
    SchemaPlans(EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "a"}]}), None)  # no schema rule: fine


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://[::1", "is not a valid URL (Invalid IPv6 URL)"),
        ("http://registry:99999", "is not a valid URL (Port out of range 0-65535)"),
        ("ftp://registry", "must be http(s)://host[:port][/path]"),
        ("http://svc:pa55-w0rd@registry:8081", "put registry credentials in username/password, not in the URL"),
    ],
)
def test_a_url_that_cannot_be_a_registry_is_a_clear_error_without_its_credentials(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="invalid --schema-registry") as err:
        registry_settings(url)
    assert problem in err.value.problem
    assert "pa55-w0rd" not in str(err.value)
