"""HashiCorp Vault / OpenBao Transit as the KMS (needs the ``vault`` extra: ``hvac``).

KEK id = the Transit key name (Transit has no separate key ids; the key version travels inside
the ciphertext, ``vault:vN:…``). DEKs come from ``datakey/plaintext/<name>`` (the DEK never
leaves Vault unwrapped except to us), EDEKs are the ``vault:vN:…`` strings as UTF-8, unwrap is
``decrypt/<name>`` with ``batch_input`` for many EDEKs at once.

State mapping: a missing key (404, or 400 "encryption key not found") is lost → KekNotFound; a
soft-deleted key (OpenBao ``keys/<name>/soft-delete``; "refusing to use soft-deleted key") is
restorable → KekPendingDeletion; a ciphertext version below ``min_decryption_version`` is refused
by policy → KekDisabled (Transit has no whole-key "disabled" state; this is its closest analogue
and it is undone by lowering ``min_decryption_version``). Connection errors, 412, 429 and 5xx →
KmsUnavailable; 401/403 → KmsAccessDenied.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from strongroom.errors import KmsError
from strongroom.kms.api import CALL_WIDE_ERRORS, DekPair, Edek, KekState, Kms
from strongroom.kms.config import ProviderConfig, provider_package, require_tls, validate_config
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    KmsAccessDenied,
    KmsMisconfigured,
    KmsTlsError,
    KmsUnavailable,
    UnknownAlias,
)

PROVIDER: Final = "vault"
#: Transit's own pattern for key names (rejecting anything else also rules out path tricks).
KEY_NAME: Final = re.compile(r"^\w(?:[\w.-]*\w)?$")
_DEK_BITS: Final = 256


@dataclass(frozen=True, slots=True)
class TransitKeyInfo:
    """What Transit says about one key (see :meth:`VaultKms.key_info`)."""

    name: str
    state: KekState
    latest_version: int
    min_decryption_version: int
    deletion_allowed: bool


class VaultKmsConfig(ProviderConfig):
    """Vault/OpenBao Transit connection (environment prefix ``STRONGROOM_VAULT_``)."""

    model_config = SettingsConfigDict(env_prefix="STRONGROOM_VAULT_")

    name: str = Field(default=PROVIDER, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    address: str = Field(pattern=r"^https?://[^\s/]+(/\S*)?$")
    token: SecretStr
    namespace: str | None = None
    mount_path: str = Field(default="transit", pattern=r"^[\w.-]+(/[\w.-]+)*$")
    #: Verify the server's TLS certificate (ignored for http://).
    verify_tls: bool = True
    #: CA bundle to verify the server with instead of the system store.
    ca_cert: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    timeout_seconds: float = Field(default=10.0, gt=0)
    #: Allow ``http://`` to a Vault that is not on this machine (refused by default: see docs/threat-model.md).
    allow_plaintext_http: bool = False

    @model_validator(mode="after")
    def _tls_off_this_machine(self) -> VaultKmsConfig:
        require_tls(self.address, self.allow_plaintext_http, "address")
        return self

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, token: SecretStr) -> SecretStr:
        if not token.get_secret_value().strip():
            raise ValueError("the Vault token is empty")
        return token

    @field_validator("client_key")
    @classmethod
    def _key_needs_cert(cls, key: Path | None, info: ValidationInfo) -> Path | None:
        if key is not None and info.data.get("client_cert") is None:
            raise ValueError("client_key needs client_cert")
        return key


class VaultKms(Kms):
    """Transit-backed KMS. One ``hvac.Client`` (one HTTP connection pool) per instance."""

    def __init__(self, config: VaultKmsConfig) -> None:
        self.config = config
        self.name = config.name
        self._hvac = provider_package("hvac", provider="Vault", extra="vault", submodules=("exceptions",))
        verify: bool | str = str(config.ca_cert) if config.ca_cert else config.verify_tls
        cert: str | tuple[str, str] | None = None
        if config.client_cert is not None:  # a PEM with both, or separate cert and key files
            cert = str(config.client_cert)
            if config.client_key is not None:
                cert = (cert, str(config.client_key))
        self._client = self._hvac.Client(
            url=config.address.rstrip("/"),
            token=config.token.get_secret_value(),
            namespace=config.namespace,
            verify=verify,
            cert=cert,
            timeout=config.timeout_seconds,
        )
        self._transit = self._client.secrets.transit
        self._mount = config.mount_path

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> VaultKms:
        return cls(validate_config(VaultKmsConfig, values))

    # ------------------------------------------------------------------ Kms
    def resolve_alias(self, alias: str) -> str:
        self._check_name(alias, UnknownAlias)
        try:
            self._transit.read_key(name=alias, mount_point=self._mount)
        except Exception as exc:  # noqa: BLE001 - mapped onto strongroom errors right here
            error = self._map(exc, alias)
            if isinstance(error, KekNotFound) and not isinstance(error, KekPendingDeletion):
                raise UnknownAlias(f"Transit key {alias!r} does not exist at mount {self._mount!r}") from None
            raise error from None
        return alias

    def create_kek(self, alias: str) -> str:
        """A new Transit key named ``alias`` (``aes256-gcm96``); needs ``create`` on ``<mount>/keys/<alias>``."""
        self._check_name(alias, UnknownAlias)
        self._call(alias, self._transit.create_key, name=alias, key_type="aes256-gcm96", mount_point=self._mount)
        return alias

    def generate_dek(self, kek_id: str) -> DekPair:
        self._check_name(kek_id, KekNotFound)
        data = self._call(
            kek_id,
            self._transit.generate_data_key,
            name=kek_id,
            key_type="plaintext",
            bits=_DEK_BITS,
            mount_point=self._mount,
        )
        dek = self._b64(data["plaintext"], kek_id)
        return DekPair(dek, Edek(self.name, kek_id, data["ciphertext"].encode("ascii")))

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        """Transit ``encrypt``; a ``context`` goes in as ``associated_data`` (AES-GCM AAD, aes256-gcm96 keys)."""
        self._check_name(kek_id, KekNotFound)
        data = self._call(
            kek_id,
            self._transit.encrypt_data,
            name=kek_id,
            plaintext=base64.b64encode(plaintext).decode("ascii"),
            mount_point=self._mount,
            **_associated(context),
        )
        return Edek(self.name, kek_id, data["ciphertext"].encode("ascii"), context)

    def unwrap(self, edek: Edek) -> bytes:
        ciphertext = self._vault_ciphertext(edek)
        data = self._call(
            edek.kek_id,
            self._transit.decrypt_data,
            name=edek.kek_id,
            ciphertext=ciphertext,
            mount_point=self._mount,
            **_associated(edek.context),
        )
        return self._b64(data["plaintext"], edek.kek_id)

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        """One ``decrypt`` call with ``batch_input`` per KEK among ``edeks``."""
        results: list[bytes | KmsError | None] = [None] * len(edeks)
        by_kek: dict[str, list[tuple[int, str]]] = {}
        for index, edek in enumerate(edeks):
            try:
                if edek.context:  # bound EDEKs (wrapping keys: few) are unwrapped one by one
                    results[index] = self.unwrap(edek)
                else:
                    by_kek.setdefault(edek.kek_id, []).append((index, self._vault_ciphertext(edek)))
            except CALL_WIDE_ERRORS:
                raise
            except KmsError as exc:
                results[index] = exc
        for kek_id, items in by_kek.items():
            try:
                outcomes = self._decrypt_batch(kek_id, items)
            except CALL_WIDE_ERRORS:
                raise
            except KmsError as exc:  # a KEK-level answer (missing, soft-deleted): true for each item
                outcomes = [exc] * len(items)
            for (index, _), outcome in zip(items, outcomes, strict=True):
                results[index] = outcome
        return [r if r is not None else KmsError("internal: no result") for r in results]

    def describe_kek(self, kek_id: str) -> KekState:
        if not KEY_NAME.match(kek_id):
            return KekState.MISSING
        try:
            response = self._transit.read_key(name=kek_id, mount_point=self._mount)
        except Exception as exc:  # noqa: BLE001
            error = self._map(exc, kek_id)
            if isinstance(error, KekPendingDeletion):
                return KekState.PENDING_DELETION
            if isinstance(error, KekNotFound):
                return KekState.MISSING
            raise error from None
        if response["data"].get("soft_deleted"):
            return KekState.PENDING_DELETION
        return KekState.ENABLED

    def key_info(self, kek_id: str) -> TransitKeyInfo:
        """Transit details beyond :class:`KekState`, for doctor and recovery.

        ``describe_kek`` reports a key with ``deletion_allowed=true`` as ENABLED (it still works);
        this is where that risk — one API call from losing every EDEK under it — is visible.
        """
        state = self.describe_kek(kek_id)
        if state is KekState.MISSING:
            return TransitKeyInfo(kek_id, state, 0, 0, False)
        try:
            data = self._transit.read_key(name=kek_id, mount_point=self._mount)["data"]
        except Exception as exc:  # noqa: BLE001
            raise self._map(exc, kek_id) from None
        return TransitKeyInfo(
            kek_id,
            state,
            int(data.get("latest_version", 0)),
            int(data.get("min_decryption_version", 0)),
            bool(data.get("deletion_allowed", False)),
        )

    def close(self) -> None:
        self._client.adapter.close()

    # ------------------------------------------------------------------ internals
    def _decrypt_batch(self, kek_id: str, items: list[tuple[int, str]]) -> list[bytes | KmsError]:
        batch = [{"ciphertext": ciphertext} for _, ciphertext in items]
        try:
            response = self._transit.decrypt_data(name=kek_id, batch_input=batch, mount_point=self._mount)
            entries = response["data"]["batch_results"]
        except self._hvac.exceptions.InvalidRequest as exc:
            # When every item fails, Vault answers 400 but still reports each item.
            entries = ((exc.json or {}).get("data") or {}).get("batch_results")
            if not entries:
                raise self._map(exc, kek_id) from None
        except Exception as exc:  # noqa: BLE001
            raise self._map(exc, kek_id) from None
        outcomes: list[bytes | KmsError] = []
        for entry in entries:
            if entry.get("error"):
                outcomes.append(self._map_message(entry["error"], kek_id))
            else:
                try:
                    outcomes.append(self._b64(entry["plaintext"], kek_id))
                except KmsError as exc:
                    outcomes.append(exc)
        return outcomes

    def _call(self, kek_id: str, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            response = method(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every client failure becomes a strongroom error
            raise self._map(exc, kek_id) from None
        data: dict[str, Any] = response["data"]
        return data

    def _map(self, exc: Exception, kek_id: str) -> KmsError:
        """Translate an hvac/requests exception into the strongroom KMS error it means."""
        errors = self._hvac.exceptions
        ref = f"{self.name}:{kek_id}"
        where = f"{self.config.address} (mount {self._mount!r})"
        if isinstance(exc, errors.InvalidPath):
            if any("no handler for route" in str(e) for e in exc.errors or ()):
                return KmsMisconfigured(f"Vault at {where} has no Transit engine at that mount")
            return KekNotFound(f"KEK {ref} does not exist at {where}")
        if isinstance(exc, errors.Forbidden | errors.Unauthorized):
            return KmsAccessDenied(f"Vault at {where} denied access to KEK {ref} (HTTP 403)")
        if isinstance(exc, errors.InvalidRequest):
            return self._map_message(" ".join(exc.errors or [str(exc)]), kek_id)
        transient = (
            errors.RateLimitExceeded,
            errors.InternalServerError,
            errors.BadGateway,
            errors.VaultDown,
            errors.PreconditionFailed,
            errors.VaultNotInitialized,
        )
        if isinstance(exc, transient):
            return KmsUnavailable(f"Vault at {where} is unavailable ({type(exc).__name__}) for KEK {ref}")
        import requests

        if isinstance(exc, requests.exceptions.SSLError):
            return KmsTlsError(f"TLS verification of Vault at {where} failed")
        if isinstance(exc, requests.exceptions.RequestException):
            return KmsUnavailable(f"cannot reach Vault at {where}: {type(exc).__name__}")
        if isinstance(exc, errors.VaultError):
            return KmsError(f"Vault at {where} failed for KEK {ref}: {type(exc).__name__}")
        return KmsError(f"unexpected failure talking to Vault at {where}: {type(exc).__name__}")

    def _map_message(self, message: str, kek_id: str) -> KmsError:
        ref = f"{self.name}:{kek_id}"
        text = message.lower()
        if "soft-deleted" in text or "soft deleted" in text:
            return KekPendingDeletion(
                f"KEK {ref} is soft-deleted",
                hint=f"restore it: POST {self._mount}/keys/{kek_id}/soft-delete-restore",
            )
        if "not found" in text:
            return KekNotFound(f"KEK {ref} does not exist (Vault: {message})")
        if "disallowed by policy" in text or "too old" in text:
            return KekDisabled(
                f"KEK {ref} refuses this key version (Vault: {message})",
                hint=f"lower min_decryption_version of {self._mount}/keys/{kek_id} if this data must be read",
            )
        if "permission denied" in text:
            return KmsAccessDenied(f"Vault denied access to KEK {ref}")
        return EdekInvalid(f"Vault refused the EDEK of KEK {ref}: {message}")

    def _vault_ciphertext(self, edek: Edek) -> str:
        self.check_provider(edek)
        self._check_name(edek.kek_id, EdekInvalid)
        try:
            text = edek.ciphertext.decode("ascii")
        except UnicodeDecodeError:
            raise EdekInvalid(f"EDEK of {edek.kek_ref} is not a Vault ciphertext string") from None
        if not text.startswith("vault:v"):
            raise EdekInvalid(f"EDEK of {edek.kek_ref} does not start with 'vault:v'")
        return text

    def _check_name(self, name: str, error: type[KmsError]) -> None:
        if not KEY_NAME.match(name):
            raise error(f"{name!r} is not a valid Transit key name")

    @staticmethod
    def _b64(value: str, kek_id: str) -> bytes:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise EdekInvalid(f"Vault returned a plaintext for KEK {kek_id!r} that is not base64") from None


def _associated(context: bytes) -> dict[str, str]:
    """Transit's ``associated_data`` argument for a bound EDEK (nothing for an unbound one)."""
    return {"associated_data": base64.b64encode(context).decode("ascii")} if context else {}
