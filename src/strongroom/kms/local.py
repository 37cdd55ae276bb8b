"""The local KMS: KEKs in a keyring file, for development, tests and the demo. NOT FOR PRODUCTION.

Plainly: the KEKs live in a file next to the data. With a passphrase the file is sealed under an
scrypt-derived key; without one only its 0600 permissions protect it (see
:mod:`strongroom.kms.local_keyring`). It supports the same KEK life cycle as the real providers —
versions and rotation, disable, scheduled deletion, deletion — so lost-key paths can be exercised
without a server.

EDEK layout (``Edek.ciphertext``): ``0x01 ‖ u32be KEK version ‖ nonce(12) ‖ AES-256-GCM(KEK
version key, DEK)``, with AAD ``"strongroom-local-kek/v1" ‖ u16be len + KEK id ‖ u32be version``
so an EDEK cannot be replayed under another KEK or version.
"""

from __future__ import annotations

import base64
import os
import shlex
import struct
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from strongroom.crypto.aead import generate_dek
from strongroom.kms.api import DekPair, Edek, KekState, Kms
from strongroom.kms.config import ProviderConfig, validate_config
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    UnknownAlias,
)
from strongroom.kms.local_keyring import KeyringData, KeyringFile

PROVIDER: Final = "local"
_EDEK_VERSION: Final = 0x01
_HEADER: Final = struct.Struct(">BI")
_NONCE_SIZE: Final = 12
_AAD_LABEL: Final = b"strongroom-local-kek/v1"
_MAX_PLAINTEXT: Final = 4096


class LocalKmsConfig(ProviderConfig):
    """Configuration of the local KMS (environment prefix ``STRONGROOM_LOCAL_KMS_``)."""

    model_config = SettingsConfigDict(env_prefix="STRONGROOM_LOCAL_KMS_")

    name: str = Field(default=PROVIDER, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    path: Path
    passphrase: SecretStr | None = None
    #: Create an empty keyring when the file does not exist yet.
    create: bool = False


def _aad(kek_id: str, version: int, context: bytes = b"") -> bytes:
    """The EDEK's AAD; a bound EDEK (``context``) appends ``u32be len ‖ context`` (unbound ones unchanged)."""
    kek = kek_id.encode("utf-8")
    base = _AAD_LABEL + struct.pack(">H", len(kek)) + kek + struct.pack(">I", version)
    return base + struct.pack(">I", len(context)) + context if context else base


def wrap_with_kek(
    kek: bytes, kek_id: str, version: int, plaintext: bytes, nonce: bytes | None = None, context: bytes = b""
) -> bytes:
    """The local EDEK bytes of ``plaintext`` under one KEK version (``nonce`` only for test vectors)."""
    nonce = nonce if nonce is not None else os.urandom(_NONCE_SIZE)
    sealed = AESGCM(kek).encrypt(nonce, plaintext, _aad(kek_id, version, context))
    return _HEADER.pack(_EDEK_VERSION, version) + nonce + sealed


def unwrap_with_kek(kek: bytes, kek_id: str, ciphertext: bytes, context: bytes = b"") -> bytes:
    """Inverse of :func:`wrap_with_kek` given the right KEK version key (and the same context)."""
    version = edek_kek_version(ciphertext)
    nonce = ciphertext[_HEADER.size : _HEADER.size + _NONCE_SIZE]
    try:
        return AESGCM(kek).decrypt(nonce, ciphertext[_HEADER.size + _NONCE_SIZE :], _aad(kek_id, version, context))
    except InvalidTag:
        bound = " with this binding" if context else ""
        raise EdekInvalid(f"EDEK does not open under KEK local:{kek_id} version {version}{bound}") from None


def edek_kek_version(ciphertext: bytes) -> int:
    """The KEK version a local EDEK was wrapped with; :class:`EdekInvalid` if it is not one."""
    if len(ciphertext) < _HEADER.size + _NONCE_SIZE + 16 or ciphertext[0] != _EDEK_VERSION:
        raise EdekInvalid(f"local EDEK of {len(ciphertext)} bytes is truncated or has an unknown layout")
    version: int = _HEADER.unpack_from(ciphertext)[1]
    return version


class LocalKms(Kms):
    """KMS over a keyring file. Safe to share between threads and processes."""

    def __init__(self, config: LocalKmsConfig) -> None:
        self.config = config
        self.name = config.name
        passphrase = config.passphrase.get_secret_value() if config.passphrase else None
        self.keyring = KeyringFile(config.path, passphrase)
        if config.create:
            self.keyring.create(exist_ok=True)
        self.keyring.read()  # fail now, not at the first record, if the file is missing or locked
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> LocalKms:
        return cls(validate_config(LocalKmsConfig, values))

    def create_kek(self, alias: str) -> str:
        return LocalKeyringAdmin(self.keyring).create_kek(alias)

    def resolve_alias(self, alias: str) -> str:
        data = self.keyring.read()
        kek_id = data["aliases"].get(alias)
        if kek_id is not None and kek_id in data["keks"]:
            return str(kek_id)
        if alias in data["keks"]:
            return alias
        raise UnknownAlias(
            f"KEK alias {alias!r} does not exist in keyring {self.keyring.path}",
            hint=f"create it: `strongroom kek create --local-kms {shlex.quote(str(self.keyring.path))} "
            f"--kek-alias {shlex.quote(alias)}`",
        )

    def generate_dek(self, kek_id: str) -> DekPair:
        dek = generate_dek()
        return DekPair(dek, self.wrap(kek_id, dek))

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        if not 1 <= len(plaintext) <= _MAX_PLAINTEXT:
            raise EdekInvalid(f"can wrap 1-{_MAX_PLAINTEXT} bytes, got {len(plaintext)}")
        kek = self._usable_kek(kek_id)
        version = int(kek["primary"])
        key = base64.b64decode(kek["versions"][str(version)])
        return Edek(self.name, kek_id, wrap_with_kek(key, kek_id, version, plaintext, context=context), context)

    def unwrap(self, edek: Edek) -> bytes:
        self.check_provider(edek)
        kek = self._usable_kek(edek.kek_id)
        version = edek_kek_version(edek.ciphertext)
        key_b64 = kek["versions"].get(str(version))
        if key_b64 is None:
            raise KekNotFound(f"KEK {edek.kek_ref} has no version {version} (it was deleted)")
        return unwrap_with_kek(base64.b64decode(key_b64), edek.kek_id, edek.ciphertext, edek.context)

    def describe_kek(self, kek_id: str) -> KekState:
        kek = self.keyring.read()["keks"].get(kek_id)
        return KekState.MISSING if kek is None else KekState(kek["state"])

    def _usable_kek(self, kek_id: str) -> dict[str, Any]:
        kek: dict[str, Any] | None = self.keyring.read()["keks"].get(kek_id)
        ref = f"{self.name}:{kek_id}"
        if kek is None:
            raise KekNotFound(f"KEK {ref} does not exist in keyring {self.keyring.path}")
        state = KekState(kek["state"])
        if state is KekState.DISABLED:
            raise KekDisabled(f"KEK {ref} is disabled")
        if state is KekState.PENDING_DELETION:
            raise KekPendingDeletion(f"KEK {ref} is scheduled for deletion")
        return kek


class LocalKeyringAdmin:
    """KEK life-cycle operations on a keyring file (used by the demo and the admin twin)."""

    def __init__(self, keyring: KeyringFile) -> None:
        self.keyring = keyring

    def create_kek(self, alias: str | None = None) -> str:
        kek_id = str(uuid.uuid4())

        def change(data: KeyringData) -> None:
            if alias is not None and alias in data["aliases"]:
                raise UnknownAlias(
                    f"alias {alias!r} already names KEK {data['aliases'][alias]}",
                    hint="pick another alias or delete the old KEK first",
                )
            data["keks"][kek_id] = {
                "state": KekState.ENABLED.value,
                "primary": 1,
                "versions": {"1": base64.b64encode(generate_dek()).decode("ascii")},
            }
            if alias is not None:
                data["aliases"][alias] = kek_id

        self.keyring.update(change)
        return kek_id

    def rotate_kek(self, kek_id: str) -> int:
        def change(data: KeyringData) -> int:
            kek = self._existing(data, kek_id)
            version = int(kek["primary"]) + 1
            kek["versions"][str(version)] = base64.b64encode(generate_dek()).decode("ascii")
            kek["primary"] = version
            return version

        return self.keyring.update(change)

    def set_state(self, kek_id: str, state: KekState) -> None:
        if state is KekState.MISSING:
            raise ValueError("use delete_kek to make a KEK missing")

        def change(data: KeyringData) -> None:
            self._existing(data, kek_id)["state"] = state.value

        self.keyring.update(change)

    def delete_kek(self, kek_id: str) -> None:
        """Delete a KEK and its aliases for good: every EDEK under it becomes unreadable."""

        def change(data: KeyringData) -> None:
            self._existing(data, kek_id)
            del data["keks"][kek_id]
            data["aliases"] = {a: k for a, k in data["aliases"].items() if k != kek_id}

        self.keyring.update(change)

    @staticmethod
    def _existing(data: KeyringData, kek_id: str) -> dict[str, Any]:
        kek: dict[str, Any] | None = data["keks"].get(kek_id)
        if kek is None:
            raise KekNotFound(f"KEK local:{kek_id} does not exist")
        return kek
