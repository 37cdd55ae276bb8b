"""The Kafka transport: resilient client settings (``config``), output-topic limits (``topics``) and the one
module that builds every confluent-kafka client and answers watermarks, committed offsets and configs
(``transport``). The encrypting producer and decrypting consumer live above the keys, in
:mod:`strongroom.clients`."""

from strongroom.kafka.config import ClientConfig

__all__ = ["ClientConfig"]
