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
 * {@code output=rows}: one row per record in the layout of {@code strongroom.audit.schema} (LOG_ROWS_DDL), then
 * ({@code emitDigests}) the chunk digests of the records read as {@code kind=digest} rows, then ({@code
 * emitRanges}) one range marker.
 */
final class RowsReader implements PartitionReader<InternalRow> {
    static final int COLUMNS = 20;
    private static final UTF8String RECORD = UTF8String.fromString("record");
    private static final UTF8String DIGEST = UTF8String.fromString("digest");
    private static final UTF8String RANGE = UTF8String.fromString("range");

    private final ReaderSettings settings;
    private final RangePartition range;
    private final UTF8String topic;
    private final RangeRead read;
    private final RecordHashes hashes = new RecordHashes();
    private final ChunkDigests digests;
    private final Deque<InternalRow> tail = new ArrayDeque<>();
    private List<ConsumerRecord<byte[], byte[]>> batch = List.of();
    private int index;
    private long readAt;
    private boolean finished;
    private InternalRow row;
    private long records;
    private long bytes;

    RowsReader(ReaderSettings settings, RangePartition range) {
        this.settings = settings;
        this.range = range;
        this.topic = UTF8String.fromString(range.topic());
        this.digests = settings.emitDigests ? new ChunkDigests(settings.chunkSize) : null;
        this.read = new RangeRead(settings, range);
    }

    @Override
    public boolean next() {
        while (index >= batch.size()) {
            if (finished) {
                row = tail.poll();
                return row != null;
            }
            List<ConsumerRecord<byte[], byte[]>> fetched = read.next();
            if (fetched == null) {
                finish();
                continue;
            }
            batch = fetched;
            index = 0;
            readAt = System.currentTimeMillis();
        }
        row = recordRow(AuditRecord.of(batch.get(index++), hashes));
        return true;
    }

    private InternalRow recordRow(AuditRecord r) {
        records++;
        bytes += r.payloadBytes();
        if (digests != null) {
            digests.add(r.offset(), r.digest());
        }
        Object[] v = new Object[COLUMNS];
        v[0] = topic;
        v[1] = range.partition();
        v[2] = r.offset();
        v[3] = r.leaderEpoch();
        v[4] = r.timestamp();
        v[5] = r.timestampType();
        v[6] = r.keyHash();
        v[7] = r.valueHash();
        v[8] = r.headersHash();
        v[9] = r.keyLen() < 0 ? null : r.keyLen();
        v[10] = r.valueLen() < 0 ? null : r.valueLen();
        v[11] = readAt;
        v[12] = RECORD;
        return new GenericInternalRow(v);
    }

    /** The rows after the records: digest rows, then the range marker. */
    private void finish() {
        finished = true;
        long now = System.currentTimeMillis();
        if (digests != null) {
            for (Map.Entry<Long, ChunkDigests.Chunk> e : digests.chunks().entrySet()) {
                ChunkDigests.Chunk c = e.getValue();
                Object[] v = base(c.minOffset, now, DIGEST);
                v[13] = c.maxOffset + 1;
                v[14] = c.records;
                v[16] = e.getKey();
                v[17] = c.xor;
                v[18] = c.lo;
                v[19] = c.hi;
                tail.add(new GenericInternalRow(v));
            }
        }
        if (settings.emitRanges) {
            Object[] v = base(read.first(), now, RANGE);
            v[13] = read.actualEnd();
            v[14] = records;
            v[15] = bytes;
            tail.add(new GenericInternalRow(v));
        }
    }

    private Object[] base(long offset, long now, UTF8String kind) {
        Object[] v = new Object[COLUMNS];
        v[0] = topic;
        v[1] = range.partition();
        v[2] = offset;
        v[11] = now;
        v[12] = kind;
        return v;
    }

    @Override
    public InternalRow get() {
        return row;
    }

    @Override
    public void close() {
        read.close();
    }
}
