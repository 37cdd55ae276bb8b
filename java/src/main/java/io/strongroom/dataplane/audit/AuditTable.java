package io.strongroom.dataplane.audit;

import java.util.EnumSet;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The source's table: readable as a batch (planned or explicit ranges) and as a micro-batch stream. */
final class AuditTable implements SupportsRead {
    private final StructType schema;

    AuditTable(StructType schema) {
        this.schema = schema;
    }

    @Override
    public String name() {
        return "strongroom-audit-kafka";
    }

    @Override
    @SuppressWarnings("deprecation") // Spark 4 prefers columns(), whose default derives them from this schema
    public StructType schema() {
        return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        ReaderSettings settings = new ReaderSettings(options.asCaseSensitiveMap());
        return () -> new Scan() {
            @Override
            public StructType readSchema() {
                return schema;
            }

            @Override
            public Batch toBatch() {
                return new AuditBatch(settings);
            }

            @Override
            public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
                return new AuditStream(settings);
            }
        };
    }
}
