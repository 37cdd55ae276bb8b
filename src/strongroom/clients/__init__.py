"""The client library: an encrypting producer and a decrypting consumer for applications without Spark.

Built on the Kafka transport (:mod:`strongroom.kafka`) and the per-subject keys (:mod:`strongroom.keys`);
the per-record core (:mod:`strongroom.clients.sealing`) is the same one the Spark pipelines use, so both
write byte-compatible records.

Quick start::

    from strongroom import ClientConfig, EncryptionRules, KeyManager, KeyTable, kms_from_config
    from strongroom.clients import DecryptingConsumer, EncryptingProducer
"""

from strongroom.clients.consumer import DecryptingConsumer
from strongroom.clients.errors import ClientClosed, DecryptFailed, DeliveryFailed, KmsOutage, RecordRejected
from strongroom.clients.producer import EncryptingProducer, ProduceOutcome, ProducerRecord
from strongroom.clients.records import DecryptedMessage, MessageStatus

__all__ = [
    "ClientClosed",
    "DecryptFailed",
    "DecryptedMessage",
    "DecryptingConsumer",
    "DeliveryFailed",
    "EncryptingProducer",
    "KmsOutage",
    "MessageStatus",
    "ProduceOutcome",
    "ProducerRecord",
    "RecordRejected",
]
