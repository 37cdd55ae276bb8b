package io.strongroom.dataplane.audit;

import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/** The audit columns of one record: coordinates, epoch, timestamp and content hashes - never the content. */
record AuditRecord(long offset, Integer leaderEpoch, long timestamp, byte timestampType, byte[] keyHash,
        byte[] valueHash, byte[] headersHash, int keyLen, int valueLen) {

    /** Kafka's timestamp type as confluent-kafka numbers it (0 none, 1 CreateTime, 2 LogAppendTime). */
    static byte timestampType(ConsumerRecord<?, ?> r) {
        return (byte) (r.timestampType().id + 1);
    }

    static AuditRecord of(ConsumerRecord<byte[], byte[]> r, RecordHashes hashes) {
        byte[] key = r.key();
        byte[] value = r.value();
        Optional<Integer> epoch = r.leaderEpoch();
        return new AuditRecord(r.offset(), epoch.orElse(null), r.timestamp(), timestampType(r), hashes.bytes(key),
                hashes.bytes(value), hashes.headers(r.headers()), key == null ? -1 : key.length,
                value == null ? -1 : value.length);
    }

    long digest() {
        return RecordDigest.of(offset, leaderEpoch, timestamp, keyHash, valueHash, headersHash);
    }

    long payloadBytes() {
        return Math.max(0, keyLen) + Math.max(0, valueLen);
    }
}
