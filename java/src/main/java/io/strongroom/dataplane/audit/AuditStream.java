package io.strongroom.dataplane.audit;

import java.util.TreeMap;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * The capture's stream: offsets {@code {topic: {partition: next offset}}} in Spark's checkpoint (with the file
 * sink: exactly-once); a new partition is read from its log start; the end never moves backwards within a run
 * (after a truncation the stream waits until the log passes what it already read, so offsets it has seen are not
 * captured again with new content).
 */
final class AuditStream implements MicroBatchStream {
    private final ReaderSettings settings;
    private OffsetPlanner planner;
    private TreeMap<String, TreeMap<String, Long>> high = new TreeMap<>();

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
    public Offset latestOffset() {
        KafkaOffsets latest = planner().resolve("latest", false);
        TreeMap<String, TreeMap<String, Long>> merged = new TreeMap<>();
        high.forEach((t, ps) -> merged.put(t, new TreeMap<>(ps)));
        latest.offsets.forEach((t, ps) -> ps.forEach((p, off) -> {
            TreeMap<String, Long> parts = merged.computeIfAbsent(t, k -> new TreeMap<>());
            parts.put(p, Math.max(off, parts.getOrDefault(p, off)));
        }));
        high = merged;
        TreeMap<String, TreeMap<String, Long>> copy = new TreeMap<>();
        merged.forEach((t, ps) -> copy.put(t, new TreeMap<>(ps)));
        return new KafkaOffsets(copy);
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
