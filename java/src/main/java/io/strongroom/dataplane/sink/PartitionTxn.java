package io.strongroom.dataplane.sink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * The transaction writing one source partition's rows, as {@code _PartitionTxn} in
 * {@code strongroom/spark/kafka_sink.py}: the same transactional id (so the engines fence each other),
 * the group's committed offset read after the fencing (or by clients kept from the partition's last transaction, once
 * they proved they still hold the id: {@link TxnClients}), the new source offset sent inside the transaction.
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
    private final TxnClients clients;
    private boolean open;
    /** Whether the transaction ended without error, so the clients may serve the partition's next one. */
    private boolean reusable;

    PartitionTxn(SinkSettings settings, String topic, int partition) {
        this.settings = settings;
        this.topic = topic;
        this.partition = partition;
        TxnClients.Taken taken = TxnClients.take(settings, topic, partition);
        this.clients = taken.clients();
        this.groupOffset = taken.committed();
        this.committedBefore = Math.max(taken.committed(), 0);
        open = true;
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
            clients.producer.send(
                    new ProducerRecord<>(verdict.topic(), null, ts, verdict.key(), verdict.value(), headers));
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
        clients.producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(settings.groupId()));
        clients.producer.commitTransaction(); // flushes; throws if any record was not delivered
        open = false;
        reusable = true;
    }

    void abort() {
        open = false;
        clients.producer.abortTransaction();
        reusable = true;
    }

    /**
     * On a stop: end the transaction now (best effort; a later attempt's fencing aborts it anyway). A failed task's
     * clients are never kept, even of a partition whose transaction ended cleanly.
     */
    void abortIfOpen() {
        if (open) {
            try {
                abort();
            } catch (RuntimeException e) {
                // the brokers may be what failed: the next attempt's fencing aborts it; the original error wins
            }
        }
        reusable = false;
    }

    long nextOffset() {
        return Math.max(lastOffset + 1, committedBefore);
    }

    /** Keep the clients for the partition's next transaction if this one ended cleanly; else close them. */
    @Override
    public void close() {
        if (reusable) { // set only once the transaction ended
            clients.giveBack();
        } else {
            clients.closeNow();
        }
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
