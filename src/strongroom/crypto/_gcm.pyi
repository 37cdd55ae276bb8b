"""Types of the native AES-256-GCM helpers (``_gcm.c``, built by ``make``)."""

from collections.abc import Mapping
from typing import Any

HEADER_END: int
MIN_SIZE: int

class Gcm:
    """An AES-256-GCM key ready to seal and open (OpenSSL's EVP)."""

    def __init__(self, key: bytes) -> None: ...
    def decrypt(self, nonce: bytes, data: bytes | memoryview, associated_data: bytes | None) -> bytes: ...
    def encrypt(self, nonce: bytes, data: bytes | memoryview, associated_data: bytes | None) -> bytes: ...

def configure(message_type: type[Any], slot_setters: tuple[Any, ...], decrypted_status: Any,
              marker_name: str) -> None: ...  # fmt: skip
def open_run(msgs: Any, start: int, topic: str | None, marker: tuple[str, bytes | None], bound_topic: str,
             openers: dict[tuple[bytes, bytes, str], tuple[bytes, bytes, str]], ciphers: dict[bytes, Any],
             out: list[Any], finished: dict[tuple[str, int], int],
             fields: tuple[tuple[bytes, ...], tuple[bytes, ...], bytes, tuple[bytes, ...]] | None = None,
             ) -> int: ...  # fmt: skip
def seal_fields(value: bytes, names: tuple[bytes, ...], suffixes: tuple[bytes, ...], aad_base: bytes,
                header: bytes, cipher: Gcm, nonces: bytes) -> bytes | None: ...  # fmt: skip
def open_fields(value: bytes, names: tuple[bytes, ...], suffixes: tuple[bytes, ...], label: bytes,
                topic_parts: tuple[bytes, ...], subject: bytes,
                ciphers: Mapping[bytes, Any]) -> bytes | tuple[bytes] | None: ...  # fmt: skip
def wrap_subject_keys(wk: bytes, label: bytes, wk_id: bytes, subjects: list[bytes],
                      material: bytes) -> list[tuple[bytes, bytes, bytes]]: ...  # fmt: skip
