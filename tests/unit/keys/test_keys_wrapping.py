"""Local wrapping of subject keys by wrapping keys: binding, limits, one KMS unwrap per WK."""

from __future__ import annotations

import threading
import time

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.crypto.aead import generate_dek
from strongroom.keys.errors import KeysConfigError, WrappingKeyUnavailable
from strongroom.keys.wrapping import (
    WRAPPED_SK_SIZE,
    ActiveWrappingKey,
    WrappingKeyCache,
    WrappingKeyPolicy,
    new_key_id,
    new_wk_id,
    unwrap_subject_key,
    wrap_subject_key,
)


def test_wrap_and_unwrap_a_subject_key() -> None:
    wk = AESGCM(generate_dek())
    sk, key_id, wk_id = generate_dek(), new_key_id(), new_wk_id()
    wrapped = wrap_subject_key(wk, sk, b"alice", key_id, wk_id)
    assert len(wrapped) == WRAPPED_SK_SIZE
    assert sk not in wrapped
    assert unwrap_subject_key(wk, wrapped, b"alice", key_id, wk_id) == sk


@pytest.mark.parametrize("moved", ["subject", "key_id", "wk_id", "wk"])
def test_a_wrapped_key_does_not_open_anywhere_else(moved: str) -> None:
    wk = AESGCM(generate_dek())
    sk, key_id, wk_id = generate_dek(), new_key_id(), new_wk_id()
    wrapped = wrap_subject_key(wk, sk, b"alice", key_id, wk_id)
    args = {"wk": wk, "subject": b"alice", "key_id": key_id, "wk_id": wk_id}
    args[moved] = {"subject": b"bob", "key_id": new_key_id(), "wk_id": new_wk_id(), "wk": AESGCM(generate_dek())}[moved]
    with pytest.raises(WrappingKeyUnavailable, match="does not open"):
        unwrap_subject_key(args["wk"], wrapped, args["subject"], args["key_id"], args["wk_id"])


def test_truncated_wrapped_key_is_reported() -> None:
    with pytest.raises(WrappingKeyUnavailable, match="expected 60"):
        unwrap_subject_key(AESGCM(generate_dek()), b"short", b"a", new_key_id(), new_wk_id())


def test_wrapping_key_limits() -> None:
    wk = ActiveWrappingKey(new_wk_id(), "local:k", AESGCM(generate_dek()), created=100.0, max_keys=10, max_age=60)
    assert not wk.exhausted(100.0, 10)
    assert wk.exhausted(100.0, 11)  # a batch never straddles two WKs' budgets
    wk.used = 10
    assert wk.exhausted(100.0, 1)
    wk.used = 0
    assert wk.exhausted(160.0)
    with pytest.raises(KeysConfigError):
        WrappingKeyPolicy(max_keys=0)


def test_cold_readers_unwrap_each_wrapping_key_once_even_concurrently() -> None:
    cache = WrappingKeyCache()
    calls = []
    wk = generate_dek()

    def fetch() -> bytes:
        calls.append(1)
        time.sleep(0.05)
        return wk

    wk_id = new_wk_id()
    threads = [threading.Thread(target=cache.get_or_fetch, args=(wk_id, fetch)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert cache.kms_unwraps == 1
    cache.forget(wk_id)
    assert cache.get(wk_id) is None
