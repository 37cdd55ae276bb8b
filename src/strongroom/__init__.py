"""strongroom: keep the data you store in Apache Kafka safe.

The names a client-library or DataFrame-API user needs first are exported here, imported on first use
(so ``import strongroom`` stays cheap and no layer imports another by accident)::

    from strongroom import ClientConfig, EncryptionRules, KeyManager, KeyTable, kms_from_config
    from strongroom.clients import DecryptingConsumer, EncryptingProducer
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("strongroom")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

if TYPE_CHECKING:
    from strongroom.errors import StrongroomError
    from strongroom.kafka.config import ClientConfig
    from strongroom.keys.erasure import erase
    from strongroom.keys.manager import KeyManager
    from strongroom.keys.table import KeyTable
    from strongroom.kms.registry import kms_from_config
    from strongroom.policies import OnErasedField, OnErasedRecord, OnFailure, OnPending, OnReject
    from strongroom.rules import EncryptionRules, TopicRule

_EXPORTS = {
    "ClientConfig": "strongroom.kafka.config",
    "EncryptionRules": "strongroom.rules",
    "KeyManager": "strongroom.keys.manager",
    "KeyTable": "strongroom.keys.table",
    "OnErasedField": "strongroom.policies",
    "OnErasedRecord": "strongroom.policies",
    "OnFailure": "strongroom.policies",
    "OnPending": "strongroom.policies",
    "OnReject": "strongroom.policies",
    "StrongroomError": "strongroom.errors",
    "TopicRule": "strongroom.rules",
    "erase": "strongroom.keys.erasure",
    "kms_from_config": "strongroom.kms.registry",
}

__all__ = [
    "ClientConfig",
    "EncryptionRules",
    "KeyManager",
    "KeyTable",
    "OnErasedField",
    "OnErasedRecord",
    "OnFailure",
    "OnPending",
    "OnReject",
    "StrongroomError",
    "TopicRule",
    "__version__",
    "erase",
    "kms_from_config",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'strongroom' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
