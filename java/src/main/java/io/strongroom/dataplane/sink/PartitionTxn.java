package io.strongroom.dataplane.sink;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * The transaction writing one source partition's rows, as {@code _PartitionTxn} in
 * {@code strongroom/spark/kafka_sink.py}: the same transactional id (so the engines fence each other),
 * the group's committed offset read after the fencing, the new source offset sent inside the transaction.
 * No per-record callback: a failed delivery makes {@code commitTransaction} throw, and the write aborts.
 */
final class PartitionTxn implements AutoCloseable {
    final String topic;
    final int partition;
    final long groupOffset;
    final long committedBefore;
    long firstOffset = -1;
    long lastOffset = -1;
    long written;
    long skipped;
    final Map<String, Long> statuses = new TreeMap<>();
    private final SinkSettings settings;
    private final KafkaProducer<byte[], byte[]> producer;
    private boolean open;

    PartitionTxn(SinkSettings settings, String topic, int partition) {
        this.settings = settings;
        this.topic = topic;
        this.partition = partition;
        this.producer = new KafkaProducer<>(settings.producerConfig(topic, partition));
        try {
            producer.initTransactions(); // fences zombies, finishes their open transaction
            long committed = -1;
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings.consumerConfig())) {
                TopicPartition tp = new TopicPartition(topic, partition);
                OffsetAndMetadata found = consumer.committed(java.util.Set.of(tp), Duration.ofSeconds(60)).get(tp);
                if (found != null) {
                    committed = found.offset();
                }
            }
            this.groupOffset = committed >= 0 ? committed : -1;
            this.committedBefore = Math.max(committed, 0);
            producer.beginTransaction();
            open = true;
        } catch (RuntimeException e) {
            producer.close(Duration.ZERO);
            throw e;
        }
    }

    /** Count a row's verdict and write it if the policy says so (offset order within the partition). */
    void take(long offset, Verdict verdict) {
        if (firstOffset < 0) {
            firstOffset = offset;
        }
        lastOffset = Math.max(lastOffset, offset);
        statuses.merge(verdict.status(), 1L, Long::sum);
        if (verdict.emit()) {
            List<org.apache.kafka.common.header.Header> headers = new ArrayList<>(verdict.headers().size());
            for (SourceRecord.Header h : verdict.headers()) {
                headers.add(new RecordHeader(h.name(), h.value()));
            }
            Long ts = verdict.timestampMs() != null && verdict.timestampMs() >= 0 ? verdict.timestampMs() : null;
            producer.send(new ProducerRecord<>(verdict.topic(), null, ts, verdict.key(), verdict.value(), headers));
            written++;
        }
    }

    void commit() {
        if (lastOffset < committedBefore) {
            abort(); // a replay of work already committed: nothing to add
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(new TopicPartition(topic, partition),
                new OffsetAndMetadata(lastOffset + 1));
        producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(settings.groupId()));
        producer.commitTransaction(); // flushes; throws if any record was not delivered
        open = false;
    }

    void abort() {
        open = false;
        producer.abortTransaction();
    }

    /** On a stop: end the transaction now (best effort; a later attempt's fencing aborts it anyway). */
    void abortIfOpen() {
        if (open) {
            try {
                abort();
            } catch (RuntimeException e) {
                // the brokers may be what failed: the next attempt's fencing aborts it; the original error wins
            }
        }
    }

    long nextOffset() {
        return Math.max(lastOffset + 1, committedBefore);
    }

    @Override
    public void close() {
        producer.close(Duration.ofSeconds(open ? 0 : 30));
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
