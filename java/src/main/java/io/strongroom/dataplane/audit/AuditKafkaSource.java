package io.strongroom.dataplane.audit;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The audit's Kafka reader in the JVM: a Spark DataSource V2 ({@code spark.read} and {@code spark.readStream}
 * with {@code .format("io.strongroom.dataplane.audit.AuditKafkaSource")}) that reads planned offset ranges with
 * the Java {@code KafkaConsumer} in the executors, records each record's leader epoch, and hashes and digests it
 * there - the same rows as the Python {@code strongroom-kafka} source, with the same options.
 */
public final class AuditKafkaSource implements TableProvider {
    /** Rows of {@code output=rows}: {@code strongroom.audit.schema.LOG_ROWS_DDL}. */
    public static final String ROWS_DDL = "topic STRING, partition INT, offset BIGINT, leader_epoch INT, "
            + "timestamp BIGINT, timestamp_type TINYINT, key_hash BINARY, value_hash BINARY, headers_hash BINARY, "
            + "key_len INT, value_len INT, read_at BIGINT, kind STRING, range_end BIGINT, range_records BIGINT, "
            + "range_bytes BIGINT, chunk BIGINT, digest_xor BIGINT, digest_lo BIGINT, digest_hi BIGINT";
    /** Rows of {@code output=digests}: {@code strongroom.audit.digest.DIGEST_DDL}. */
    public static final String DIGESTS_DDL = "topic STRING, partition INT, kind STRING, chunk BIGINT, "
            + "records BIGINT, digest_xor BIGINT, digest_lo BIGINT, digest_hi BIGINT, min_offset BIGINT, "
            + "max_offset BIGINT, range_end BIGINT, range_records BIGINT, range_bytes BIGINT";

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        boolean digests = options.getOrDefault("output", "rows").equalsIgnoreCase("digests");
        return StructType.fromDDL(digests ? DIGESTS_DDL : ROWS_DDL);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new AuditTable(schema);
    }
}
