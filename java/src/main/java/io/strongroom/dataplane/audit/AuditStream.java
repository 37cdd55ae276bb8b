package io.strongroom.dataplane.audit;

import java.util.TreeMap;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/**
 * The capture's stream: offsets {@code {topic: {partition: next offset}}} in Spark's checkpoint (with the file
 * sink: exactly-once); a new partition is read from its log start. A batch never ends below where it starts, nor
 * without a partition its start has (a leader that did not answer the listing keeps its place rather than be read
 * again from the log start), and the end never moves backwards within a run (after a truncation the stream waits
 * until the log passes what it already read, so offsets it has seen are not captured again with new content).
 *
 * <p>{@code availableNow}: the end is listed once, when the query starts, and the query runs batches (first the one
 * a stopped query had planned, if any) until it gets there. Without this Spark runs a single batch, the one a
 * stopped query planned when there is one, and the capture must start the query again.
 */
final class AuditStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    private final ReaderSettings settings;
    private OffsetPlanner planner;
    private TreeMap<String, TreeMap<String, Long>> high = new TreeMap<>();
    private KafkaOffsets availableNowEnd;

    AuditStream(ReaderSettings settings) {
        this.settings = settings;
    }

    private OffsetPlanner planner() {
        if (planner == null) {
            planner = new OffsetPlanner(settings);
        }
        return planner;
    }

    @Override
    public Offset initialOffset() {
        return planner().resolve(settings.starting, true);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return ReadLimit.allAvailable();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        availableNowEnd = listedEnd();
    }

    @Override
    public Offset latestOffset() {
        return latestOffset(null, ReadLimit.allAvailable());
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        TreeMap<String, TreeMap<String, Long>> end = copyOf(
                (availableNowEnd != null ? availableNowEnd : listedEnd()).offsets);
        if (start != null) {
            raiseTo(end, asOffsets(start).offsets);
        }
        return new KafkaOffsets(end);
    }

    /** The partitions' committed ends as listed now, never below what this run listed before. */
    private KafkaOffsets listedEnd() {
        raiseTo(high, planner().resolve("latest", false).offsets);
        return new KafkaOffsets(copyOf(high));
    }

    /** Raises each partition of {@code into} to its offset in {@code from}, adding the partitions it lacks. */
    private static void raiseTo(TreeMap<String, TreeMap<String, Long>> into,
            TreeMap<String, TreeMap<String, Long>> from) {
        from.forEach((t, ps) -> ps.forEach((p, off) -> {
            TreeMap<String, Long> parts = into.computeIfAbsent(t, k -> new TreeMap<>());
            parts.put(p, Math.max(off, parts.getOrDefault(p, off)));
        }));
    }

    private static TreeMap<String, TreeMap<String, Long>> copyOf(TreeMap<String, TreeMap<String, Long>> offsets) {
        TreeMap<String, TreeMap<String, Long>> copy = new TreeMap<>();
        offsets.forEach((t, ps) -> copy.put(t, new TreeMap<>(ps)));
        return copy;
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        return planner().plan(asOffsets(start), asOffsets(end)).toArray(new InputPartition[0]);
    }

    private static KafkaOffsets asOffsets(Offset offset) {
        return offset instanceof KafkaOffsets k ? k : KafkaOffsets.parse(offset.json());
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new RangeReaderFactory(settings);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return KafkaOffsets.parse(json);
    }

    @Override
    public void commit(Offset end) {
        // progress lives in Spark's checkpoint, never in a consumer group
    }

    @Override
    public void stop() {
        if (planner != null) {
            planner.close();
            planner = null;
        }
    }
}
