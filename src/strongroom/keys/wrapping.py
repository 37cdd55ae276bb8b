"""The middle of the key hierarchy: wrapping keys (WK) that wrap subject keys (SK) locally.

KMS KEK → WK → SK. A WK is a random 256-bit key wrapped by the KEK with one ``kms.wrap`` call; it then
wraps up to ``max_keys`` subject keys (or for ``max_age``) with AES-256-GCM in this process. Readers
unwrap each WK once and keep it in memory, so KMS calls grow with the number of WKs, not subjects.

An SK wrap binds where the key belongs: AAD = ``"strongroom/sk/v1" ‖ u32be len + subject ‖ key id ‖
WK id``. A wrapped key copied under another subject, key id or WK fails to open instead of silently
becoming someone else's key. Layout of ``wrapped_sk``: ``nonce(12) ‖ ciphertext(32) ‖ tag(16)``.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.crypto.aead import KEY_SIZE, generate_dek
from strongroom.keys.errors import KeysConfigError, WrappingKeyUnavailable
from strongroom.keys.records import KEY_ID_SIZE, WK_ID_SIZE

try:  # built by `make` from crypto/_gcm.c; without it the Python loop below wraps each key
    from strongroom.crypto._gcm import wrap_subject_keys as _native_wrap
except ImportError:  # pragma: no cover - `make` builds it; a source checkout without a compiler still works
    _native_wrap = None  # type: ignore[assignment]

_AAD_LABEL: Final = b"strongroom/sk/v1"
_NONCE_SIZE: Final = 12
WRAPPED_SK_SIZE: Final = _NONCE_SIZE + KEY_SIZE + 16
_U32: Final = struct.Struct(">I")
#: Randomness of one new subject key: the key, its id, its wrapping nonce.
_MATERIAL_SIZE: Final = KEY_SIZE + KEY_ID_SIZE + _NONCE_SIZE

#: Defaults decided with the lead: a WK wraps at most a million subject keys, or for thirty days.
DEFAULT_WK_MAX_KEYS: Final = 1_000_000
DEFAULT_WK_MAX_AGE_SECONDS: Final = 30 * 24 * 3600.0


def new_key_id() -> bytes:
    """A random 16-byte subject key id (ids are random so they reveal nothing about the subject)."""
    return os.urandom(KEY_ID_SIZE)


def new_wk_id() -> bytes:
    return os.urandom(WK_ID_SIZE)


def sk_aad(subject: bytes, key_id: bytes, wk_id: bytes) -> bytes:
    return b"".join((_AAD_LABEL, _U32.pack(len(subject)), subject, key_id, wk_id))


def wrap_subject_key(wk: AESGCM, sk: bytes, subject: bytes, key_id: bytes, wk_id: bytes) -> bytes:
    """``nonce ‖ AES-256-GCM(WK, SK)`` bound to subject, key id and WK id."""
    nonce = os.urandom(_NONCE_SIZE)
    return nonce + wk.encrypt(nonce, sk, sk_aad(subject, key_id, wk_id))


def new_wrapped_subject_keys(wk: bytes, wk_id: bytes, subjects: list[bytes]) -> list[tuple[bytes, bytes, bytes]]:
    """``(key id, subject key, wrapped subject key)`` for each subject: a batch of new keys under the wrapping
    key ``wk`` (its 32 bytes).

    The randomness of the whole batch (key, key id and wrapping nonce of each) comes from one
    ``os.urandom`` call and is sliced; the wraps are :func:`wrap_subject_key` per key, in one native call when
    ``make`` built it (:func:`wrap_with_randomness`).
    """
    return wrap_with_randomness(wk, wk_id, subjects, os.urandom(_MATERIAL_SIZE * len(subjects)))


def wrap_with_randomness(
    wk: bytes, wk_id: bytes, subjects: list[bytes], material: bytes, *, native: bool = True
) -> list[tuple[bytes, bytes, bytes]]:
    """:func:`new_wrapped_subject_keys` from given randomness (60 bytes a subject: key, key id, nonce).
    ``native=False`` takes the Python loop, which the native one equals byte for byte (the tests hold them
    to each other)."""
    if native and _native_wrap is not None:
        return _native_wrap(wk, _AAD_LABEL, wk_id, subjects, material)
    encrypt = AESGCM(wk).encrypt
    size = _MATERIAL_SIZE
    made: list[tuple[bytes, bytes, bytes]] = []
    for index, subject in enumerate(subjects):
        base = index * size
        sk = material[base : base + KEY_SIZE]
        key_id = material[base + KEY_SIZE : base + KEY_SIZE + KEY_ID_SIZE]
        nonce = material[base + KEY_SIZE + KEY_ID_SIZE : base + size]
        made.append((key_id, sk, nonce + encrypt(nonce, sk, sk_aad(subject, key_id, wk_id))))
    return made


def unwrap_subject_key(wk: AESGCM, wrapped: bytes, subject: bytes, key_id: bytes, wk_id: bytes) -> bytes:
    """Inverse of :func:`wrap_subject_key`; :class:`WrappingKeyUnavailable` if it does not open."""
    if len(wrapped) != WRAPPED_SK_SIZE:
        raise WrappingKeyUnavailable(
            f"wrapped subject key {key_id.hex()} is {len(wrapped)} bytes, expected {WRAPPED_SK_SIZE}",
            hint="the keys-topic record is corrupt; the key cannot be recovered from it",
        )
    try:
        return wk.decrypt(wrapped[:_NONCE_SIZE], wrapped[_NONCE_SIZE:], sk_aad(subject, key_id, wk_id))
    except InvalidTag:
        raise WrappingKeyUnavailable(
            f"subject key {key_id.hex()} does not open under wrapping key {wk_id.hex()} "
            "(record altered, or moved to another subject)",
            hint="the keys-topic record is corrupt or was tampered with; quarantine it",
        ) from None


@dataclass
class ActiveWrappingKey:
    """A WK this process created and uses to wrap new subject keys, with its usage counters."""

    wk_id: bytes
    kek_ref: str
    #: The wrapping key itself (in memory only, like every key table's unwrapped WKs).
    key: bytes = field(repr=False)
    created: float
    max_keys: int
    max_age: float
    used: int = 0

    def exhausted(self, now: float, extra: int = 0) -> bool:
        """True when wrapping ``extra`` more keys would pass a limit (so a batch never straddles two)."""
        return self.used + extra > self.max_keys or now - self.created >= self.max_age


class WrappingKeyPolicy:
    """When to make a new WK: after ``max_keys`` wrapped subject keys or ``max_age`` seconds."""

    def __init__(
        self,
        max_keys: int = DEFAULT_WK_MAX_KEYS,
        max_age_seconds: float = DEFAULT_WK_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_keys < 1 or max_age_seconds <= 0:
            raise KeysConfigError(
                f"wrapping-key limits must be positive (max_keys={max_keys}, max_age_seconds={max_age_seconds})"
            )
        self.max_keys = max_keys
        self.max_age = max_age_seconds
        self.clock = clock


class WrappingKeyCache:
    """Unwrapped WKs by id, in memory only (never written anywhere). Thread-safe.

    ``unwrap`` is given the function that asks the KMS; concurrent first uses of one WK wait on
    each other so a cold reader makes exactly one KMS call per WK.
    """

    def __init__(self) -> None:
        self._ciphers: dict[bytes, AESGCM] = {}
        self._lock = threading.Lock()
        self._fetch_locks: dict[bytes, threading.Lock] = {}
        self.kms_unwraps = 0

    def get(self, wk_id: bytes) -> AESGCM | None:
        return self._ciphers.get(wk_id)

    def put(self, wk_id: bytes, wk: bytes) -> AESGCM:
        if len(wk) != KEY_SIZE:
            raise WrappingKeyUnavailable(f"wrapping key {wk_id.hex()} unwrapped to {len(wk)} bytes, not {KEY_SIZE}")
        cipher = AESGCM(wk)
        with self._lock:
            self._ciphers[wk_id] = cipher
        return cipher

    def get_or_fetch(self, wk_id: bytes, fetch: Callable[[], bytes]) -> AESGCM:
        cipher = self._ciphers.get(wk_id)
        if cipher is not None:
            return cipher
        with self._lock:
            lock = self._fetch_locks.setdefault(wk_id, threading.Lock())
        with lock:
            cipher = self._ciphers.get(wk_id)
            if cipher is None:
                self.kms_unwraps += 1
                cipher = self.put(wk_id, fetch())
        return cipher

    def forget(self, wk_id: bytes) -> None:
        with self._lock:
            self._ciphers.pop(wk_id, None)

    def clear(self) -> None:
        with self._lock:
            self._ciphers.clear()

    def __len__(self) -> int:
        return len(self._ciphers)


def new_wrapping_key() -> bytes:
    """A fresh random 256-bit wrapping key (wrapped by the KMS right away, never stored in clear)."""
    return generate_dek()
