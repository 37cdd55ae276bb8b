"""KMS configuration errors never print a secret, and plaintext HTTP to a remote KMS is refused (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strongroom.cli.common import load_kms_config
from strongroom.cli.main import main
from strongroom.errors import ConfigError
from strongroom.kms.aws import AwsKmsConfig
from strongroom.kms.config import validate_config
from strongroom.kms.errors import KmsConfigError
from strongroom.kms.registry import kms_from_config
from strongroom.kms.vault import VaultKmsConfig

TOKEN = "hvs.SECRET-token-that-must-never-be-printed-42"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bad.yaml", f"provider: vault\naddress: https://vault:8200\ntoken: {TOKEN}: oops\n"),
        ("bad2.yaml", f'provider: vault\ntoken: "{TOKEN}\naddress: [\n'),
        ("bad.json", f'{{"provider": "vault", "token": "{TOKEN}" "address": "https://vault:8200"}}'),
    ],
)
def test_a_syntax_error_names_the_place_not_the_secret(
    tmp_path: Path, name: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_kms_config(str(path))
    assert "line" in err.value.problem
    assert TOKEN not in str(err.value)
    assert TOKEN[:12] not in str(err.value)
    # and through the CLI, in both output formats
    for output in ("text", "json"):
        code = main(["--output", output, "encrypt", "-b", "127.0.0.1:1", "--kms-config", str(path), "--topic", "t"])
        captured = capsys.readouterr()
        assert code == 1
        assert "cannot parse --kms-config" in captured.err + captured.out
        assert TOKEN[:12] not in captured.err + captured.out


def test_a_validation_error_names_the_field_not_the_secret() -> None:
    for config in (
        {"provider": "vault", "address": TOKEN, "token": TOKEN},  # the token pasted into the wrong field
        {"provider": "vault", "address": "https://vault:8200", "token": TOKEN, "tokne": TOKEN},
        {"provider": "aws", "secret_access_key": TOKEN, "endpoint_url": TOKEN},
    ):
        with pytest.raises(KmsConfigError) as err:
            kms_from_config(config)
        assert TOKEN not in str(err.value)
        assert TOKEN[:12] not in str(err.value)


@pytest.mark.parametrize(
    ("model", "field", "values"),
    [
        (VaultKmsConfig, "address", {"token": "t"}),
        (AwsKmsConfig, "endpoint_url", {"region": "eu-west-1"}),
    ],
)
def test_plaintext_http_is_refused_unless_local_or_explicitly_allowed(
    model: type, field: str, values: dict[str, str]
) -> None:
    for remote in ("http://vault.example.com:8200", "http://10.0.0.5:8200", "http://kms.internal/v1"):
        with pytest.raises(KmsConfigError, match=r"plaintext http:// .* not on this machine"):
            validate_config(model, {**values, field: remote})
        allowed = validate_config(model, {**values, field: remote, "allow_plaintext_http": True})
        assert getattr(allowed, field) == remote
    for local in ("http://127.0.0.1:8200", "http://localhost:8200", "http://[::1]:8200", "https://vault.example.com"):
        assert getattr(validate_config(model, {**values, field: local}), field) == local


def test_the_dev_stack_configs_still_load(tmp_path: Path) -> None:
    path = tmp_path / "kms.json"
    path.write_text(json.dumps({"provider": "vault", "address": "http://127.0.0.1:8200", "token": "root"}))
    assert load_kms_config(str(path))["address"] == "http://127.0.0.1:8200"
