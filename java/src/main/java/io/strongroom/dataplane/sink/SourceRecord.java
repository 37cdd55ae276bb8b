package io.strongroom.dataplane.sink;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;

/**
 * One source record, copied out of Spark's internal row (whose buffer the next row reuses). The row has
 * the columns of {@code SOURCE_COLUMNS} in {@code strongroom/spark/kafka_sink.py}, in that order.
 */
record SourceRecord(String topic, int partition, long offset, byte[] key, byte[] value, List<Header> headers,
        Long timestampMs) {

    /** One record header (a null value is kept as null). */
    record Header(String name, byte[] value) {
    }

    static final int TOPIC = 0;
    static final int PARTITION = 1;
    static final int OFFSET = 2;
    static final int KEY = 3;
    static final int VALUE = 4;
    static final int HEADERS = 5;
    static final int TIMESTAMP = 6;

    static SourceRecord of(InternalRow row, String topic) {
        List<Header> headers = new ArrayList<>();
        if (!row.isNullAt(HEADERS)) {
            ArrayData array = row.getArray(HEADERS);
            for (int i = 0; i < array.numElements(); i++) {
                InternalRow h = array.getStruct(i, 2);
                headers.add(new Header(h.isNullAt(0) ? null : h.getUTF8String(0).toString(),
                        h.isNullAt(1) ? null : h.getBinary(1)));
            }
        }
        return new SourceRecord(topic, row.getInt(PARTITION), row.getLong(OFFSET),
                row.isNullAt(KEY) ? null : row.getBinary(KEY), row.isNullAt(VALUE) ? null : row.getBinary(VALUE),
                headers, row.isNullAt(TIMESTAMP) ? null : row.getLong(TIMESTAMP));
    }

    /** How reasons and dead-letter headers name the record: {@code topic/partition/offset}. */
    String source() {
        return topic + "/" + partition + "/" + offset;
    }
}
