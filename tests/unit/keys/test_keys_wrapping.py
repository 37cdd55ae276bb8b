"""Local wrapping of subject keys by wrapping keys: binding, limits, one KMS unwrap per WK."""

from __future__ import annotations

import os
import random
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
    new_wrapped_subject_keys,
    unwrap_subject_key,
    wrap_subject_key,
    wrap_with_randomness,
)
from strongroom.keys.wrapping import _native_wrap as native_wrap

#: A batch of two new subject keys, frozen (wrapping key 00..1f, WK id 64..73, randomness (7i+3) mod 256):
#: (key id, subject key, wrapped), as cryptography's AESGCM made them when this vector was written.
FROZEN_BATCH = [
    (
        "e3eaf1f8ff060d141b222930373e454c",
        "030a11181f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dc",
        "535a61686f767d848b9299a0c8d392fa62a914dd0df9d7ed04576a57585a496df4a97e3e65ffe3d7ad88ddc9dc2e5f68e2cd8c6ae8"
        "7b5272dee660c8",
    ),
    (
        "878e959ca3aab1b8bfc6cdd4dbe2e9f0",
        "a7aeb5bcc3cad1d8dfe6edf4fb020910171e252c333a41484f565d646b727980",
        "f7fe050c131a21282f363d4445b8f0e6b643ec21239d18007d1a42f0c958e56ce0ded9f98d90f7da443f48bbbbc65fab54b1f42b"
        "c5db0d708054d39d",
    ),
]


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
    wk = ActiveWrappingKey(new_wk_id(), "local:k", generate_dek(), created=100.0, max_keys=10, max_age=60)
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


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_a_batch_of_new_keys_matches_the_frozen_vector(native: bool) -> None:
    if native:
        assert native_wrap is not None, "strongroom/crypto/_gcm.so is missing: `make` builds it"
    material = bytes((7 * i + 3) % 256 for i in range(120))
    made = wrap_with_randomness(bytes(range(32)), bytes(range(100, 116)), [b"alice", "zoë".encode()], material,
                                native=native)  # fmt: skip
    assert [(k.hex(), sk.hex(), w.hex()) for k, sk, w in made] == FROZEN_BATCH


def test_the_native_batch_equals_the_python_loop_and_each_key_opens_where_it_belongs() -> None:
    assert native_wrap is not None, "strongroom/crypto/_gcm.so is missing: `make` builds it"
    rng = random.Random(13)
    wk, wk_id = generate_dek(), new_wk_id()
    subjects = [b"a", "ünïcode-☃".encode(), b"x" * 4096, *(os.urandom(rng.randint(1, 300)) for _ in range(300))]
    material = os.urandom(60 * len(subjects))
    native = wrap_with_randomness(wk, wk_id, subjects, material)
    assert native == wrap_with_randomness(wk, wk_id, subjects, material, native=False)
    cipher = AESGCM(wk)
    for subject, (key_id, sk, wrapped) in zip(subjects, native, strict=True):
        assert unwrap_subject_key(cipher, wrapped, subject, key_id, wk_id) == sk
    fresh = new_wrapped_subject_keys(wk, wk_id, subjects[:50])  # its own randomness: new keys, new ids
    assert len({key_id for key_id, _, _ in fresh}) == 50
    assert not {sk for _, sk, _ in fresh} & {sk for _, sk, _ in native}


@pytest.mark.parametrize(
    "bad",
    ["short key", "short wk id", "short randomness", "a subject past 4096 bytes", "a str subject"],
)
def test_the_native_batch_refuses_what_the_key_manager_never_passes(bad: str) -> None:
    assert native_wrap is not None, "strongroom/crypto/_gcm.so is missing: `make` builds it"
    args = {"wk": generate_dek(), "wk_id": new_wk_id(), "subjects": [b"alice"], "material": os.urandom(60)}
    if bad == "short key":
        args["wk"] = b"k" * 16
    elif bad == "short wk id":
        args["wk_id"] = b"w" * 8
    elif bad == "short randomness":
        args["material"] = os.urandom(59)
    elif bad == "a subject past 4096 bytes":
        args["subjects"] = [b"x" * 4097]
    else:
        args["subjects"] = ["alice"]
    with pytest.raises(ValueError, match="wrap_subject_keys"):
        native_wrap(args["wk"], b"strongroom/sk/v1", args["wk_id"], args["subjects"], args["material"])
