package io.strongroom.dataplane.audit;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code output=digests}: the whole range is read and digested inside the executor; only one row per chunk
 * ({@code DIGEST_DDL} of {@code strongroom.audit.digest}) and the range marker leave it.
 */
final class DigestsReader implements PartitionReader<InternalRow> {
    static final int COLUMNS = 13;
    private static final UTF8String CHUNK = UTF8String.fromString("chunk");
    private static final UTF8String RANGE = UTF8String.fromString("range");

    private final ReaderSettings settings;
    private final RangePartition range;
    private final Deque<InternalRow> rows = new ArrayDeque<>();
    private boolean read;
    private InternalRow row;

    DigestsReader(ReaderSettings settings, RangePartition range) {
        this.settings = settings;
        this.range = range;
    }

    @Override
    public boolean next() {
        if (!read) {
            read = true;
            readAll();
        }
        row = rows.poll();
        return row != null;
    }

    private void readAll() {
        ChunkDigests digests = new ChunkDigests(settings.chunkSize);
        RecordHashes hashes = new RecordHashes();
        long records = 0;
        long bytes = 0;
        long first;
        long last;
        try (RangeRead reader = new RangeRead(settings, range)) {
            for (List<ConsumerRecord<byte[], byte[]>> batch = reader.next(); batch != null; batch = reader.next()) {
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    AuditRecord a = AuditRecord.of(r, hashes);
                    digests.add(a.offset(), a.digest());
                    bytes += a.payloadBytes();
                }
                records += batch.size();
            }
            first = reader.first();
            last = reader.actualEnd();
        }
        UTF8String topic = UTF8String.fromString(range.topic());
        for (Map.Entry<Long, ChunkDigests.Chunk> e : digests.chunks().entrySet()) {
            ChunkDigests.Chunk c = e.getValue();
            Object[] v = new Object[COLUMNS];
            v[0] = topic;
            v[1] = range.partition();
            v[2] = CHUNK;
            v[3] = e.getKey();
            v[4] = c.records;
            v[5] = c.xor;
            v[6] = c.lo;
            v[7] = c.hi;
            v[8] = c.minOffset;
            v[9] = c.maxOffset;
            rows.add(new GenericInternalRow(v));
        }
        Object[] v = new Object[COLUMNS];
        v[0] = topic;
        v[1] = range.partition();
        v[2] = RANGE;
        v[8] = first;
        v[10] = last;
        v[11] = records;
        v[12] = bytes;
        rows.add(new GenericInternalRow(v));
    }

    @Override
    public InternalRow get() {
        return row;
    }

    @Override
    public void close() {
        // the consumer is closed as soon as the range is read
    }
}
