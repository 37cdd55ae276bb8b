"""AEAD suites, nonce generation and DEK usage limits. Pure: no Kafka, Spark, KMS or CLI imports."""

from strongroom.crypto.aead import CIPHERS, KEY_SIZE, NONCE_SIZE, TAG_SIZE, CipherCache, generate_dek
from strongroom.crypto.errors import DekExhausted, InvalidDek
from strongroom.crypto.limits import DEFAULT_MAX_ENCRYPTIONS, DekUsage, DekUsagePolicy

__all__ = [
    "CIPHERS",
    "DEFAULT_MAX_ENCRYPTIONS",
    "KEY_SIZE",
    "NONCE_SIZE",
    "TAG_SIZE",
    "CipherCache",
    "DekExhausted",
    "DekUsage",
    "DekUsagePolicy",
    "InvalidDek",
    "generate_dek",
]
