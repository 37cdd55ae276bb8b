"""The subject keys an executor process holds, so that it can forget the erased ones before its next batch.

Spark reuses Python workers across tasks and batches (``spark.python.worker.reuse``, on by default).
A reused worker keeps module state: the envelope codec's process-wide cipher cache
(:data:`strongroom.crypto.aead.CIPHERS`) holds every DEK it sealed or opened with, as dictionary keys
and inside the ready ``AESGCM`` objects. Nothing in a batch's own objects outlives the batch, but
that cache does.

Every answer of the driver's key service carries the erasure generation of the driver's key table
and the key ids erased since the generation the executor last saw (:mod:`strongroom.keys.erasure_feed`).
:data:`EXECUTOR_KEYS` is this process's side of it: it remembers which DEK belongs to which key id
(only for keys a key service handed out), applies each answer's erasures before the batch uses any
key, and drops the DEK from the cipher cache with it. An answer that says ``reset`` (the driver cannot
list what was erased) drops every key and cipher this process holds.

The map is bounded like the cipher cache; a key evicted from it is dropped from the cipher cache too,
so the cipher cache never holds a service's key that this map could not find again. Keys of a key
service this process stopped hearing from (its job ended, another job's tasks reuse the worker) get
no more erasures: the first answer of a new service drops them.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

from strongroom.crypto.aead import CIPHERS

DEFAULT_CAPACITY: Final = 65_536


def service_id(host: str, port: int, token: str) -> str:
    """How this process names one key service (the token itself is never kept as a name)."""
    return f"{host}:{port}/{hashlib.sha256(token.encode('ascii')).hexdigest()[:16]}"


class ExecutorKeys:
    """key id → DEK of the keys this process received, and the erasure generation per key service."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = max(1, capacity)
        self._keys: OrderedDict[bytes, tuple[str, bytes]] = OrderedDict()
        self._generations: dict[str, int] = {}
        self._lock = threading.Lock()
        self.counters = {"forgotten": 0, "resets": 0}

    def generation(self, service: str) -> int | None:
        with self._lock:
            return self._generations.get(service)

    def remember(self, service: str, keys: Iterable[tuple[bytes, bytes]]) -> None:
        """Note ``(key id, DEK)`` pairs ``service`` just handed out (before they are used)."""
        with self._lock:
            for key_id, dek in keys:
                self._keys[key_id] = (service, dek)
                self._keys.move_to_end(key_id)
            while len(self._keys) > self.capacity:
                _, (_, evicted) = self._keys.popitem(last=False)
                CIPHERS.forget(evicted)

    def follow(self, service: str, generation: int, erased: Iterable[bytes], reset: bool) -> int:
        """Apply one answer's erasures: forget the erased keys (all keys if ``reset``); returns how many."""
        with self._lock:
            if reset:
                forgotten = len(self._keys)
                self._keys.clear()
                CIPHERS.clear()
                self.counters["resets"] += 1
            else:
                doomed = [k for k in erased if k in self._keys]
                if service not in self._generations:  # a new service: nobody reports erasures of older ones
                    doomed += [k for k, (owner, _) in self._keys.items() if owner != service]
                forgotten = 0
                for key_id in dict.fromkeys(doomed):
                    _, dek = self._keys.pop(key_id)
                    CIPHERS.forget(dek)
                    forgotten += 1
            self._generations[service] = generation
            self.counters["forgotten"] += forgotten
            return forgotten

    def holds(self, key_id: bytes) -> bool:
        with self._lock:
            return key_id in self._keys

    def __len__(self) -> int:
        return len(self._keys)


#: This process's keys (one per Python worker: reused workers keep it across batches, as they keep CIPHERS).
EXECUTOR_KEYS = ExecutorKeys()
