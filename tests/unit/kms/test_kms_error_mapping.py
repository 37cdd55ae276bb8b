"""The provider error tables, on the exact codes and messages the services send.

These run without a server on purpose: moto cannot produce DisabledException or
KMSInvalidStateException (it keeps using such keys), so the AWS mapping of those codes is checked
here on the codes themselves; the contract suite checks the rest against real servers.
"""

from __future__ import annotations

import pytest

from strongroom.errors import KmsError
from strongroom.kms.aws import AwsKms
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    KmsAccessDenied,
    KmsUnavailable,
)
from strongroom.kms.vault import VaultKms


@pytest.fixture(scope="module")
def aws() -> AwsKms:
    return AwsKms.from_config(
        {"region": "eu-west-1", "endpoint_url": "http://127.0.0.1:9", "access_key_id": "a", "secret_access_key": "b"}
    )


@pytest.mark.parametrize(
    ("code", "message", "status", "error"),
    [
        ("NotFoundException", "Key 'x' does not exist", 400, KekNotFound),
        ("KMSInvalidStateException", "arn:aws:kms:...:key/x is pending deletion.", 400, KekPendingDeletion),
        ("KMSInvalidStateException", "key is pending import", 400, KekDisabled),
        ("DisabledException", "arn:aws:kms:...:key/x is disabled.", 400, KekDisabled),
        ("AccessDeniedException", "", 400, KmsAccessDenied),
        ("UnrecognizedClientException", "bad token", 400, KmsAccessDenied),
        ("InvalidCiphertextException", "", 400, EdekInvalid),
        ("IncorrectKeyException", "", 400, EdekInvalid),
        ("ThrottlingException", "Rate exceeded", 400, KmsUnavailable),
        ("KMSInternalException", "", 500, KmsUnavailable),
        ("DependencyTimeoutException", "", 503, KmsUnavailable),
        ("SomethingNew", "", 503, KmsUnavailable),
        ("SomethingNew", "", 400, KmsError),
    ],
)
def test_aws_codes(aws: AwsKms, code: str, message: str, status: int, error: type[KmsError]) -> None:
    mapped = aws._map_code(code, message, status, "aws:k")
    assert type(mapped) is error


@pytest.fixture(scope="module")
def vault() -> VaultKms:
    return VaultKms.from_config({"address": "http://127.0.0.1:9", "token": "t"})


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("encryption key not found", KekNotFound),
        ("refusing to use soft-deleted key", KekPendingDeletion),
        ("ciphertext or signature version is disallowed by policy (too old)", KekDisabled),
        ("invalid ciphertext: no prefix", EdekInvalid),
        ("cipher: message authentication failed", EdekInvalid),
        ("permission denied", KmsAccessDenied),
    ],
)
def test_vault_messages(vault: VaultKms, message: str, error: type[KmsError]) -> None:
    assert type(vault._map_message(message, "k")) is error


def test_names_that_could_escape_the_mount_are_refused(vault: VaultKms) -> None:
    from strongroom.kms.errors import UnknownAlias

    for name in ("../sys/seal", "a/b", "", "-x", "x-"):
        with pytest.raises(UnknownAlias, match="not a valid Transit key name"):
            vault.resolve_alias(name)
        with pytest.raises(KekNotFound, match="not a valid Transit key name"):
            vault.generate_dek(name)
