"""AWS KMS as the KMS (needs the ``aws`` extra: ``boto3``).

KEK id = the KeyId UUID (what DescribeKey returns for ``alias/<name>``), never an alias, so an
alias moved to another key cannot silently change which key an EDEK names. EDEK = the
CiphertextBlob; unwrap = ``Decrypt`` with an explicit ``KeyId`` (AWS then refuses a blob of another
key instead of decrypting it).

Retries are the job of :class:`~strongroom.kms.retrying.RetryingKms`, so botocore's own retries are
off by default (``max_attempts=1``): a wrapper that retries a client that also retries multiplies
the waiting.

Error mapping: NotFoundException → KekNotFound; KMSInvalidStateException "pending deletion" →
KekPendingDeletion (other invalid states → KekDisabled); DisabledException → KekDisabled;
AccessDenied/credential errors → KmsAccessDenied; InvalidCiphertext/IncorrectKey → EdekInvalid;
throttling, KMSInternal, DependencyTimeout, KeyUnavailable, 5xx and connection errors →
KmsUnavailable.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any, Final

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from strongroom.errors import KmsError
from strongroom.kms.api import DekPair, Edek, KekState, Kms
from strongroom.kms.config import ProviderConfig, provider_package, require_tls, validate_config
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    KmsAccessDenied,
    KmsConfigError,
    KmsTlsError,
    KmsUnavailable,
    UnknownAlias,
)

PROVIDER: Final = "aws"
_KEY_ID: Final = re.compile(r"^(arn:aws[\w-]*:kms:[\w-]+:\d{12}:key/)?[0-9a-fA-F-]{36}$|^mrk-[0-9a-f]{32}$")
_TRANSIENT_CODES: Final = frozenset(
    {
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "KMSInternalException",
        "DependencyTimeoutException",
        "KeyUnavailableException",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
_DENIED_CODES: Final = frozenset(
    {
        "AccessDeniedException",
        "AccessDenied",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "ExpiredTokenException",
        "IncompleteSignature",
    }
)
_EDEK_CODES: Final = frozenset(
    {
        "InvalidCiphertextException",
        "IncorrectKeyException",
        "InvalidKeyUsageException",
        "InvalidGrantTokenException",
    }
)
_STATES: Final = {
    "Enabled": KekState.ENABLED,
    "Updating": KekState.ENABLED,
    "Disabled": KekState.DISABLED,
    "PendingImport": KekState.DISABLED,
    "Unavailable": KekState.DISABLED,
    "Creating": KekState.DISABLED,
    "PendingDeletion": KekState.PENDING_DELETION,
    "PendingReplicaDeletion": KekState.PENDING_DELETION,
}


class AwsKmsConfig(ProviderConfig):
    """AWS KMS connection (environment prefix ``STRONGROOM_AWS_KMS_``; the AWS credential chain applies)."""

    model_config = SettingsConfigDict(env_prefix="STRONGROOM_AWS_KMS_")

    name: str = Field(default=PROVIDER, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    #: Region; None uses the AWS chain (AWS_REGION, profile config).
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d+$")
    #: Endpoint override (VPC endpoint, LocalStack, moto).
    endpoint_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    #: Named profile from ~/.aws; None uses the default credential chain.
    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    read_timeout_seconds: float = Field(default=10.0, gt=0)
    #: botocore's own attempts per call; keep 1 and use RetryingKms.
    max_attempts: int = Field(default=1, ge=1, le=10)
    #: Allow an ``http://`` endpoint that is not on this machine (refused by default: see docs/threat-model.md).
    allow_plaintext_http: bool = False

    @model_validator(mode="after")
    def _tls_off_this_machine(self) -> AwsKmsConfig:
        require_tls(self.endpoint_url, self.allow_plaintext_http, "endpoint_url")
        return self


class AwsKms(Kms):
    """AWS KMS. One boto3 client per instance (boto3 clients are thread-safe)."""

    def __init__(self, config: AwsKmsConfig) -> None:
        self.config = config
        self.name = config.name
        boto3 = provider_package("boto3", provider="AWS", extra="aws")
        import botocore.config
        import botocore.exceptions

        self._botocore = botocore
        if (config.access_key_id is None) != (config.secret_access_key is None):
            raise KmsConfigError("AwsKmsConfig: access_key_id and secret_access_key go together")
        try:
            session = boto3.session.Session(
                profile_name=config.profile,
                region_name=config.region,
                aws_access_key_id=config.access_key_id,
                aws_secret_access_key=_secret(config.secret_access_key),
                aws_session_token=_secret(config.session_token),
            )
            self._client = session.client(
                "kms",
                endpoint_url=config.endpoint_url,
                config=botocore.config.Config(
                    connect_timeout=config.connect_timeout_seconds,
                    read_timeout=config.read_timeout_seconds,
                    retries={"total_max_attempts": config.max_attempts, "mode": "standard"},
                ),
            )
        except botocore.exceptions.ProfileNotFound:
            raise KmsConfigError(f"AWS profile {config.profile!r} does not exist") from None
        except botocore.exceptions.NoRegionError:
            raise KmsConfigError(
                "no AWS region configured", hint="set region in the KMS config or AWS_REGION"
            ) from None

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> AwsKms:
        return cls(validate_config(AwsKmsConfig, values))

    # ------------------------------------------------------------------ Kms
    def resolve_alias(self, alias: str) -> str:
        key = alias if alias.startswith("alias/") or _KEY_ID.match(alias) else f"alias/{alias}"
        try:
            metadata = self._client.describe_key(KeyId=key)["KeyMetadata"]
        except Exception as exc:  # noqa: BLE001 - mapped onto strongroom errors right here
            error = self._map(exc, key)
            if type(error) is KekNotFound:
                raise UnknownAlias(f"AWS KMS has no key {key!r} in {self._where()}") from None
            raise error from None
        return str(metadata["KeyId"])

    def create_kek(self, alias: str) -> str:
        """A new symmetric key with ``alias/<alias>`` pointing at it (needs kms:CreateKey and kms:CreateAlias)."""
        name = alias if alias.startswith("alias/") else f"alias/{alias}"
        created = self._call(name, self._client.create_key, KeySpec="SYMMETRIC_DEFAULT", KeyUsage="ENCRYPT_DECRYPT",
                             Description=f"strongroom KEK {name}")  # fmt: skip
        kek_id = str(created["KeyMetadata"]["KeyId"])
        self._call(name, self._client.create_alias, AliasName=name, TargetKeyId=kek_id)
        return kek_id

    def generate_dek(self, kek_id: str) -> DekPair:
        response = self._call(kek_id, self._client.generate_data_key, KeyId=kek_id, KeySpec="AES_256")
        return DekPair(response["Plaintext"], Edek(self.name, kek_id, response["CiphertextBlob"]))

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        """``Encrypt``; a ``context`` goes in as the EncryptionContext (:func:`_encryption_context`)."""
        response = self._call(kek_id, self._client.encrypt, KeyId=kek_id, Plaintext=plaintext,
                              **_encryption_context(context))  # fmt: skip
        return Edek(self.name, kek_id, response["CiphertextBlob"], context)

    def unwrap(self, edek: Edek) -> bytes:
        self.check_provider(edek)
        response = self._call(edek.kek_id, self._client.decrypt, KeyId=edek.kek_id, CiphertextBlob=edek.ciphertext,
                              **_encryption_context(edek.context))  # fmt: skip
        plaintext: bytes = response["Plaintext"]
        return plaintext

    def describe_kek(self, kek_id: str) -> KekState:
        try:
            metadata = self._client.describe_key(KeyId=kek_id)["KeyMetadata"]
        except Exception as exc:  # noqa: BLE001
            error = self._map(exc, kek_id)
            if type(error) is KekNotFound:
                return KekState.MISSING
            raise error from None
        return _STATES.get(str(metadata.get("KeyState")), KekState.DISABLED)

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ internals
    def _call(self, kek_id: str, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = method(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every client failure becomes a strongroom error
            raise self._map(exc, kek_id) from None
        return response

    def _where(self) -> str:
        return self.config.endpoint_url or f"region {self._client.meta.region_name}"

    def _map(self, exc: Exception, kek_id: str) -> KmsError:
        """Translate a botocore exception into the strongroom KMS error it means."""
        botocore = self._botocore
        ref = f"{self.name}:{kek_id}"
        if isinstance(exc, botocore.exceptions.ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            message = str(error.get("Message", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            return self._map_code(code, message, status, ref)
        if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError):
            return KmsAccessDenied(f"no usable AWS credentials for KEK {ref}")
        if isinstance(exc, botocore.exceptions.SSLError):
            return KmsTlsError(f"TLS verification of AWS KMS at {self._where()} failed")
        connection_errors = (
            botocore.exceptions.ConnectionError,
            botocore.exceptions.HTTPClientError,
            botocore.exceptions.ReadTimeoutError,
        )
        if isinstance(exc, connection_errors):
            return KmsUnavailable(f"cannot reach AWS KMS at {self._where()}: {type(exc).__name__}")
        return KmsError(f"unexpected failure talking to AWS KMS for KEK {ref}: {type(exc).__name__}")

    def _map_code(self, code: str, message: str, status: int, ref: str) -> KmsError:
        if code == "NotFoundException":
            return KekNotFound(f"KEK {ref} does not exist in AWS KMS at {self._where()}")
        if code == "KMSInvalidStateException":
            if "pending deletion" in message.lower() or "pendingdeletion" in message.lower():
                return KekPendingDeletion(f"KEK {ref} is pending deletion in AWS KMS")
            return KekDisabled(f"KEK {ref} is in a state that refuses this operation: {message}")
        if code == "DisabledException":
            return KekDisabled(f"KEK {ref} is disabled in AWS KMS", hint="EnableKey it and retry")
        if code in _DENIED_CODES:
            return KmsAccessDenied(f"AWS KMS denied access to KEK {ref} ({code})")
        if code in _EDEK_CODES:
            return EdekInvalid(f"AWS KMS refused the EDEK of KEK {ref} ({code})")
        if code in _TRANSIENT_CODES or status >= 500 or status == 429:
            return KmsUnavailable(f"AWS KMS is unavailable for KEK {ref} ({code or status})")
        return KmsError(f"AWS KMS failed for KEK {ref}: {code} {message}".strip())


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _encryption_context(context: bytes) -> dict[str, dict[str, str]]:
    """AWS's ``EncryptionContext`` for a bound EDEK: ``{"strongroom-binding": base64(context)}``."""
    return {"EncryptionContext": {"strongroom-binding": base64.b64encode(context).decode("ascii")}} if context else {}
