"""Key management: the KMS interface, its errors, one module per provider, and wrappers.

``api`` (interface and value types) and ``errors`` are all most callers need; providers
(``local``, ``vault``, ``aws``) load lazily through :func:`kms_from_config`; ``caching``,
``retrying`` and ``metered`` wrap any KMS; ``selector`` picks a KEK per topic; ``envelope_keys``
bridges KMS and envelope; ``admin`` holds the KEK life-cycle twins used by tests and the demo.
"""

from strongroom.kms.api import DekPair, Edek, KekState, Kms
from strongroom.kms.caching import CachingKms
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    KmsAccessDenied,
    KmsConfigError,
    KmsMisconfigured,
    KmsProviderMissing,
    KmsTlsError,
    KmsUnavailable,
    UnknownAlias,
    UnresolvedKek,
)
from strongroom.kms.metered import MeteredKms
from strongroom.kms.registry import PROVIDERS, kms_from_config, load_provider
from strongroom.kms.retrying import RetryingKms
from strongroom.kms.selector import TemplateKekSelector

__all__ = [
    "PROVIDERS",
    "CachingKms",
    "DekPair",
    "Edek",
    "EdekInvalid",
    "KekDisabled",
    "KekNotFound",
    "KekPendingDeletion",
    "KekState",
    "Kms",
    "KmsAccessDenied",
    "KmsConfigError",
    "KmsMisconfigured",
    "KmsProviderMissing",
    "KmsTlsError",
    "KmsUnavailable",
    "MeteredKms",
    "RetryingKms",
    "TemplateKekSelector",
    "UnknownAlias",
    "UnresolvedKek",
    "kms_from_config",
    "load_provider",
]
