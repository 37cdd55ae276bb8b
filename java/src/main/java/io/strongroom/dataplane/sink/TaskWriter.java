package io.strongroom.dataplane.sink;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.strongroom.dataplane.keys.KeyServiceClient;
import io.strongroom.dataplane.keys.KeyServiceException;
import io.strongroom.dataplane.schema.SchemaEngineException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One write task: the rows of (normally) one source partition, in offset order, as
 * {@code make_partition_writer} in {@code strongroom/spark/kafka_sink.py} does it. It opens the partition's
 * transaction first, skips rows below the committed offset, transforms the rest chunk by chunk (one
 * key-service request per chunk), writes them, and commits the records with the new source offset.
 * Returns one summary per source partition, as JSON text with the fields of {@code SUMMARY_SCHEMA}.
 *
 * <p>Failures leave the task as the Python sink's do, so the driver's retry loop treats both engines alike:
 * a broker error goes on as it is (the write is retried from the committed offsets); a fatal row, a fenced
 * producer or a transform that failed carries {@link #FATAL_MARK} (never retried).
 */
final class TaskWriter {
    static final String FATAL_MARK = "[strongroom-fatal]";
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Largest chunk of value bytes transformed at once (besides the settings' row count). */
    private static final long CHUNK_BYTES = 64L * 1024 * 1024;
    /** How long a key-service request may take (the driver may wait out a KMS outage). */
    private static final int SERVICE_TIMEOUT_MILLIS = 3_600_000;

    private final SinkSettings settings;
    private final Map<String, PartitionTxn> txns = new LinkedHashMap<>();
    /** The transaction of the rows being taken, and its source topic as the rows spell it. */
    private PartitionTxn current;
    private UTF8String currentTopic;
    private final List<SourceRecord> chunk = new ArrayList<>();
    private long chunkBytes;
    private KeyServiceClient service;
    private RecordTransform transform;

    TaskWriter(SinkSettings settings) {
        this.settings = settings;
    }

    List<String> run(Iterator<InternalRow> rows) {
        try {
            while (rows.hasNext()) {
                take(rows.next());
            }
            flush();
            for (PartitionTxn txn : txns.values()) {
                txn.commit();
            }
            List<String> summaries = new ArrayList<>(txns.size());
            for (PartitionTxn txn : txns.values()) {
                summaries.add(summary(txn));
            }
            return summaries;
        } catch (RuntimeException e) {
            for (PartitionTxn txn : txns.values()) {
                txn.abortIfOpen();
            }
            throw failure(e);
        } finally {
            for (PartitionTxn txn : txns.values()) {
                txn.close();
            }
            if (service != null) {
                service.close();
            }
        }
    }

    private void take(InternalRow row) {
        int partition = row.getInt(SourceRecord.PARTITION);
        UTF8String topicBytes = row.getUTF8String(SourceRecord.TOPIC);
        PartitionTxn txn = current;
        if (txn == null || txn.partition != partition || !topicBytes.equals(currentTopic)) {
            // a chunk holds one partition's rows: its verdicts go to one transaction
            flush();
            String topic = topicBytes.toString();
            txn = txns.get(topic + "\u0000" + partition);
            if (txn == null) {
                txn = new PartitionTxn(settings, topic, partition);
                txns.put(topic + "\u0000" + partition, txn);
            }
            current = txn;
            currentTopic = topicBytes.clone(); // the row's buffer is reused by the next row
        }
        if (row.getLong(SourceRecord.OFFSET) < txn.committedBefore) {
            txn.skipped++; // an earlier transaction wrote it already
            return;
        }
        SourceRecord record = SourceRecord.of(row, txn.topic);
        chunk.add(record);
        chunkBytes += record.value() == null ? 0 : record.value().length;
        if (chunk.size() >= settings.chunkRows() || chunkBytes >= CHUNK_BYTES) {
            flush();
        }
    }

    private void flush() {
        if (chunk.isEmpty()) {
            return;
        }
        List<Verdict> verdicts;
        try {
            verdicts = transform().apply(chunk);
        } catch (RuntimeException e) {
            SourceRecord first = chunk.get(0);
            String problem = e instanceof KeyServiceException k ? k.problem()
                    : e instanceof SchemaEngineException s ? s.problem() + "; " + s.hint() : describe(e);
            throw new FatalFailure("process the records from " + first.topic() + "[" + first.partition() + "]@"
                    + first.offset() + " on: " + problem);
        }
        PartitionTxn txn = current; // every row of the chunk is of the current partition
        for (int i = 0; i < verdicts.size(); i++) {
            SourceRecord record = chunk.get(i);
            Verdict verdict = verdicts.get(i);
            if (verdict.fatal()) {
                txn.abort();
                throw new FatalFailure(verdict.status() + " record " + record.topic() + "[" + record.partition()
                        + "]@" + record.offset() + ": " + verdict.reason());
            }
            txn.take(record.offset(), verdict);
        }
        chunk.clear();
        chunkBytes = 0;
    }

    private RecordTransform transform() {
        if (transform == null) {
            transform = switch (settings.kind()) {
                case "encrypt" -> new EncryptRecords(settings, service());
                case "decrypt" -> new DecryptRecords(settings, service());
                case "copy" -> new CopyRecords(settings);
                default -> throw new IllegalStateException("the JVM sink has no '" + settings.kind() + "' transform");
            };
        }
        return transform;
    }

    private KeyServiceClient service() {
        service = new KeyServiceClient(settings.service(), SERVICE_TIMEOUT_MILLIS);
        return service;
    }

    /** What the task raises instead of {@code e}: see the class comment. */
    private RuntimeException failure(RuntimeException e) {
        if (fenced(e)) {
            StringBuilder names = new StringBuilder();
            for (PartitionTxn txn : txns.values()) {
                names.append(names.length() == 0 ? "" : ", ").append(txn.topic).append('[').append(txn.partition)
                        .append(']');
            }
            return new FatalFailure("write the output of " + (names.length() == 0 ? "a source partition" : names)
                    + ": another producer took over its transactional id during the write: the rows of one source "
                    + "partition were written by more than one task, or a second pipeline runs with the same app id");
        }
        if (e instanceof FatalFailure || e instanceof KafkaException) {
            return e; // a fatal row stops; a broker problem is retried by the driver from the committed offsets
        }
        return new FatalFailure("write the output: " + describe(e));
    }

    private static boolean fenced(Throwable e) {
        for (Throwable seen = e; seen != null; seen = seen.getCause()) {
            if (seen instanceof ProducerFencedException || seen instanceof InvalidProducerEpochException
                    || String.valueOf(seen.getMessage()).toLowerCase(java.util.Locale.ROOT).contains("fenced")) {
                return true;
            }
        }
        return false;
    }

    static String describe(Throwable e) {
        String message = e.getMessage();
        String first = message == null ? "" : message.strip().lines().findFirst().orElse("");
        return e.getClass().getSimpleName() + ": " + (first.length() > 300 ? first.substring(0, 300) : first);
    }

    /** The reason of a record whose transform raised something unforeseen: a bug, never the data's fault. */
    static String unexpected(SourceRecord record, Throwable e) {
        String message = e.getMessage() == null ? "" : e.getMessage().strip().lines().findFirst().orElse("");
        return "unexpected " + e.getClass().getSimpleName() + " while processing record " + record.source() + ": "
                + (message.length() > 200 ? message.substring(0, 200) : message) + " (a strongroom bug)";
    }

    private static String summary(PartitionTxn txn) {
        ObjectNode row = JSON.createObjectNode();
        row.put("src_topic", txn.topic);
        row.put("src_partition", txn.partition);
        row.put("committed_before", txn.committedBefore);
        row.put("first_offset", txn.firstOffset);
        row.put("next_offset", txn.nextOffset());
        row.put("written", txn.written);
        row.put("replayed_skipped", txn.skipped);
        ObjectNode statuses = row.putObject("statuses");
        txn.statuses.forEach(statuses::put);
        row.put("group_offset", txn.groupOffset);
        try {
            return JSON.writeValueAsString(row);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write a summary row", e);
        }
    }

    /** A failure the driver must not retry: a retry would meet it again. */
    static final class FatalFailure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        FatalFailure(String message) {
            super(FATAL_MARK + " " + message, null, false, false);
        }
    }
}
