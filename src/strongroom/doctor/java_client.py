"""Java-client property names librdkafka does not accept, and what to use instead.

Many teams copy settings from Java clients. librdkafka already accepts the common Java names as
aliases (``acks``, ``retries``, ``linger.ms``, ``delivery.timeout.ms``,
``max.in.flight.requests.per.connection``, ``max.partition.fetch.bytes``) and ``doctor client`` lints
those under their librdkafka meaning. The names below are rejected by librdkafka - a confluent-kafka
client refuses to start with them - so doctor names the equivalent instead of guessing a spelling.
Whether a name is accepted is always decided by the installed librdkafka, never by this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JavaOnly:
    #: The librdkafka property (or properties) to use instead, if any.
    equivalent: str | None
    note: str


JAVA_ONLY_PROPERTIES: dict[str, JavaOnly] = {
    "key.serializer": JavaOnly(
        None, "a Java class; in Python pass a Serializer object to SerializingProducer or serialize before produce()"
    ),
    "value.serializer": JavaOnly(
        None, "a Java class; in Python pass a Serializer object to SerializingProducer or serialize before produce()"
    ),
    "key.deserializer": JavaOnly(None, "a Java class; in Python deserialize after poll() or use DeserializingConsumer"),
    "value.deserializer": JavaOnly(
        None, "a Java class; in Python deserialize after poll() or use DeserializingConsumer"
    ),
    "buffer.memory": JavaOnly(
        "queue.buffering.max.kbytes",
        "librdkafka bounds the producer queue in kilobytes and in messages (queue.buffering.max.messages)",
    ),
    "max.block.ms": JavaOnly(
        None, "produce() never blocks in librdkafka: it raises BufferError when the queue is full; poll() and retry"
    ),
    "max.request.size": JavaOnly("message.max.bytes", "the largest request librdkafka will send"),
    "fetch.max.wait.ms": JavaOnly("fetch.wait.max.ms", "same meaning, different word order"),
    "send.buffer.bytes": JavaOnly("socket.send.buffer.bytes", "same meaning"),
    "receive.buffer.bytes": JavaOnly("socket.receive.buffer.bytes", "same meaning"),
    "default.api.timeout.ms": JavaOnly(None, "pass a timeout to each call (poll(timeout), admin futures' result())"),
    "sasl.jaas.config": JavaOnly(
        "sasl.username, sasl.password",
        "librdkafka has no JAAS: PLAIN and SCRAM take sasl.username/sasl.password, OAUTHBEARER sasl.oauthbearer.*",
    ),
    "sasl.login.callback.handler.class": JavaOnly(
        None,
        "a Java class; Amazon MSK IAM auth in Python uses sasl.mechanism=OAUTHBEARER with an oauth_cb "
        "(e.g. aws-msk-iam-sasl-signer-python)",
    ),
    "sasl.client.callback.handler.class": JavaOnly(None, "a Java class; see sasl.login.callback.handler.class"),
    "ssl.truststore.location": JavaOnly(
        "ssl.ca.location",
        "librdkafka reads PEM CA certificates (or the system store with ssl.ca.location=probe); export the JKS "
        "truststore with keytool",
    ),
    "ssl.truststore.password": JavaOnly(None, "PEM CA files need no password"),
    "ssl.truststore.type": JavaOnly("ssl.ca.location", "librdkafka reads PEM CA files, not JKS/PKCS12 truststores"),
    "ssl.keystore.type": JavaOnly(
        "ssl.keystore.location",
        "librdkafka reads a PKCS#12 keystore via ssl.keystore.location, or PEM via ssl.certificate.location and "
        "ssl.key.location",
    ),
    "ssl.protocol": JavaOnly(None, "OpenSSL negotiates the TLS version; there is nothing to set"),
    "interceptor.classes": JavaOnly("plugin.library.paths", "librdkafka interceptors are C plugins"),
    "partitioner.class": JavaOnly(
        "partitioner", "librdkafka's built-in partitioners; murmur2_random matches the Java client's default"
    ),
    "metric.reporters": JavaOnly(
        "statistics.interval.ms", "librdkafka emits JSON statistics to a stats_cb every statistics.interval.ms"
    ),
}
