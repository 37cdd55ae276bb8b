package io.strongroom.dataplane.audit;

import org.apache.spark.sql.connector.read.InputPartition;

/** One offset range {@code [start, end)} of one Kafka partition, read by one task. */
record RangePartition(String topic, int partition, long start, long end) implements InputPartition {
    private static final long serialVersionUID = 1L;

    long size() {
        return Math.max(0, end - start);
    }
}
