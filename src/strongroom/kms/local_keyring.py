"""The keyring file behind the local KMS: storage, locking and protection at rest.

NOT FOR PRODUCTION. The KEKs sit in a file on the same machine as the data they protect. With a
passphrase, the file is sealed with AES-256-GCM under a key derived by scrypt (so a copied file
alone is not enough); without one, the KEKs are stored in plain JSON and only the file's 0600
permissions protect them. Use it for development, tests and the demo; use Vault/OpenBao or AWS KMS
for anything that matters.

Several processes may share one keyring: every change takes an exclusive ``flock`` on a sidecar
``<file>.lock``, re-reads the file, and replaces it atomically (write a temporary file, fsync,
rename), so readers never see a half-written file and no update is lost.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import os
import secrets
import shlex
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from strongroom.kms.errors import KmsAccessDenied, KmsConfigError, KmsUnavailable

FORMAT: Final = "strongroom-local-keyring"
FORMAT_VERSION: Final = 1
PROTECTED: Final = "scrypt+aes-256-gcm"
UNPROTECTED: Final = "file-permissions-only"
SCRYPT_N: Final = 2**15
SCRYPT_R: Final = 8
SCRYPT_P: Final = 1
_SEAL_AAD: Final = b"strongroom-local-keyring/v1"

T = TypeVar("T")
KeyringData = dict[str, Any]


def empty_keyring() -> KeyringData:
    """The decoded content of a new keyring: KEKs by id, aliases by name."""
    return {"keks": {}, "aliases": {}}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class KeyringFile:
    """One keyring file. Reads are cached until the file changes on disk; writes are locked."""

    def __init__(self, path: Path, passphrase: str | None) -> None:
        self.path = path
        self._passphrase = passphrase
        self._lock = threading.Lock()
        self._derived: dict[tuple[bytes, int, int, int], bytes] = {}
        self._cached: tuple[tuple[int, int, int], KeyringData] | None = None

    # ------------------------------------------------------------------ creating
    def create(self, *, exist_ok: bool = False) -> None:
        """Write an empty keyring (mode 0600). Refuses to overwrite an existing one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            if self.path.exists():
                if exist_ok:
                    return
                raise KmsConfigError(f"keyring {self.path} already exists", hint="use it, or remove it to start afresh")
            self._write(empty_keyring(), kdf=None)

    # ------------------------------------------------------------------ reading
    def read(self) -> KeyringData:
        """The current content (cached while the file's inode, mtime and size are unchanged)."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            raise KmsConfigError(
                f"keyring file {self.path} does not exist",
                hint=f"create it with its first KEK: `strongroom kek create --local-kms {shlex.quote(str(self.path))}`",
            ) from None
        except OSError as exc:
            raise KmsUnavailable(f"cannot stat keyring {self.path}: {exc.strerror}") from None
        signature = (info.st_ino, info.st_mtime_ns, info.st_size)
        cached = self._cached
        if cached is not None and cached[0] == signature:
            return cached[1]
        self._check_permissions(info)
        data = self._decode(self._read_text())
        self._cached = (signature, data)
        return data

    def _read_text(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise KmsUnavailable(f"cannot read keyring {self.path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise KmsConfigError(f"keyring {self.path} is corrupt", hint="restore it from a backup") from None

    def _check_permissions(self, info: os.stat_result) -> None:
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise KmsConfigError(
                f"keyring {self.path} is accessible by group or others (mode {stat.S_IMODE(info.st_mode):o})",
                hint=f"run chmod 600 {self.path}",
            )

    def _decode(self, text: str) -> KeyringData:
        try:
            document = json.loads(text)
            if document.get("format") != FORMAT or document.get("version") != FORMAT_VERSION:
                raise KmsConfigError(
                    f"{self.path} is not a version-{FORMAT_VERSION} strongroom keyring",
                    hint="point the local KMS at a keyring file created by strongroom",
                )
            if document["protection"] == UNPROTECTED:
                if self._passphrase is not None:
                    raise KmsConfigError(
                        f"keyring {self.path} is not passphrase-protected but a passphrase was configured",
                        hint="remove the passphrase from the configuration, or create a protected keyring",
                    )
                data: KeyringData = document["data"]
                return data
            return self._unseal(document)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise KmsConfigError(f"keyring {self.path} is corrupt", hint="restore it from a backup") from None

    def _unseal(self, document: dict[str, Any]) -> KeyringData:
        if self._passphrase is None:
            raise KmsConfigError(f"keyring {self.path} is passphrase-protected", hint="configure its passphrase")
        kdf = document["kdf"]
        key = self._key(base64.b64decode(kdf["salt"]), kdf["n"], kdf["r"], kdf["p"])
        try:
            plain = AESGCM(key).decrypt(
                base64.b64decode(document["nonce"]), base64.b64decode(document["sealed"]), _SEAL_AAD
            )
        except (InvalidTag, binascii.Error):
            raise KmsAccessDenied(
                f"wrong passphrase for keyring {self.path} (or the file was altered)",
                hint="configure the passphrase the keyring was created with",
            ) from None
        data: KeyringData = json.loads(plain)
        return data

    def _key(self, salt: bytes, n: int, r: int, p: int) -> bytes:
        cache_key = (salt, n, r, p)
        key = self._derived.get(cache_key)
        if key is None:
            assert self._passphrase is not None
            key = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(self._passphrase.encode("utf-8"))
            self._derived[cache_key] = key
        return key

    # ------------------------------------------------------------------ writing
    def update(self, change: Callable[[KeyringData], T]) -> T:
        """Apply ``change`` to the latest content under the file lock and write the result."""
        with self._locked():
            data = json.loads(json.dumps(self.read()))  # a private deep copy
            result = change(data)
            self._write(data, kdf=self._current_kdf())
            return result

    def _current_kdf(self) -> dict[str, Any] | None:
        if self._passphrase is None:
            return None
        document = json.loads(self._read_text())
        kdf: dict[str, Any] = document["kdf"]
        return kdf

    def _write(self, data: KeyringData, kdf: dict[str, Any] | None) -> None:
        document: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION}
        if self._passphrase is None:
            document |= {"protection": UNPROTECTED, "data": data}
        else:
            if kdf is None:
                kdf = {"salt": _b64(secrets.token_bytes(16)), "n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P}
            key = self._key(base64.b64decode(kdf["salt"]), kdf["n"], kdf["r"], kdf["p"])
            nonce = secrets.token_bytes(12)
            sealed = AESGCM(key).encrypt(nonce, json.dumps(data).encode("utf-8"), _SEAL_AAD)
            document |= {"protection": PROTECTED, "kdf": kdf, "nonce": _b64(nonce), "sealed": _b64(sealed)}
        self._atomic_write(json.dumps(document, indent=1).encode("utf-8"))

    def _atomic_write(self, content: bytes) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with self._lock:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock
