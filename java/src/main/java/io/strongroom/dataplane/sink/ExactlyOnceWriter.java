package io.strongroom.dataplane.sink;

import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * The JVM engine of the exactly-once sink, driven from PySpark ({@code strongroom/spark/jvm_sink.py}):
 * {@link #write} runs one {@link TaskWriter} per partition of the frame's internal rows (Spark's Kafka
 * source: one task per source partition) and returns the tasks' summaries to the driver. The frame has
 * the columns of {@code SOURCE_COLUMNS}, in that order; the settings are JSON without any key.
 */
public final class ExactlyOnceWriter {
    private ExactlyOnceWriter() {
    }

    /** Write the frame; one JSON summary per source partition (see {@link TaskWriter}). */
    public static String[] write(Dataset<Row> frame, String settingsJson) {
        SinkSettings.parse(settingsJson); // a malformed settings document fails here, on the driver
        List<String> summaries = frame.queryExecution().toRdd().toJavaRDD().mapPartitions(new Task(settingsJson))
                .collect();
        return summaries.toArray(new String[0]);
    }

    /**
     * Close the Kafka clients this JVM keeps for the next micro-batches of the pipeline whose consumer group is
     * {@code groupId} (it closed; null: of every pipeline). In local mode this JVM runs the tasks; a cluster's
     * executors close theirs once idle ({@link TxnClients#IDLE_NANOS}).
     */
    public static void closeIdleClients(String groupId) {
        TxnClients.closeIdle(groupId);
    }

    /** Number of Kafka client pairs (producer, offset reader) created in this JVM so far (for tests). */
    public static long clientsCreated() {
        return TxnClients.createdCount();
    }

    /** Number of kept Kafka clients in this JVM (for tests). */
    public static int idleClients() {
        return TxnClients.idleCount();
    }

    /** The task function (serialised into the task closure with the settings text). */
    private static final class Task implements FlatMapFunction<Iterator<InternalRow>, String> {
        private static final long serialVersionUID = 1L;
        private final String settingsJson;

        Task(String settingsJson) {
            this.settingsJson = settingsJson;
        }

        @Override
        public Iterator<String> call(Iterator<InternalRow> rows) {
            return new TaskWriter(SinkSettings.parse(settingsJson)).run(rows).iterator();
        }
    }
}
