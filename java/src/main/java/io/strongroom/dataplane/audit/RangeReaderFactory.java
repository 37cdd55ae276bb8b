package io.strongroom.dataplane.audit;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Makes the executor-side reader of one range: rows or digests. */
final class RangeReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final ReaderSettings settings;

    RangeReaderFactory(ReaderSettings settings) {
        this.settings = settings;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        RangePartition range = (RangePartition) partition;
        return switch (settings.output) {
            case ROWS -> new RowsReader(settings, range);
            case DIGESTS -> new DigestsReader(settings, range);
        };
    }
}
