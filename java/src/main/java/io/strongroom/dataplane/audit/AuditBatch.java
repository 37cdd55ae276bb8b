package io.strongroom.dataplane.audit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** A batch read: the explicit {@code ranges}, or the topics between {@code startingOffsets} and {@code endingOffsets}. */
final class AuditBatch implements Batch {
    private final ReaderSettings settings;

    AuditBatch(ReaderSettings settings) {
        this.settings = settings;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        List<RangePartition> pieces;
        if (settings.ranges != null) {
            pieces = RangePlan.plan(listedRanges(settings.ranges), settings.maxRecords, settings.minRanges);
        } else {
            try (OffsetPlanner planner = new OffsetPlanner(settings)) {
                pieces = planner.plan(planner.resolve(settings.starting, true), planner.resolve(settings.ending, false));
            }
        }
        return pieces.toArray(new InputPartition[0]);
    }

    /** {@code [[topic, partition, start, end], ...]}. */
    static List<RangePartition> listedRanges(String json) {
        List<RangePartition> out = new ArrayList<>();
        try {
            JsonNode root = new ObjectMapper().readTree(json);
            if (root == null || !root.isArray()) {
                throw new IllegalArgumentException("ranges must be a JSON list of [topic, partition, start, end]");
            }
            for (JsonNode r : root) {
                if (!r.isArray() || r.size() != 4) {
                    throw new IllegalArgumentException("a range must be [topic, partition, start, end], not " + r);
                }
                out.add(new RangePartition(r.get(0).asText(), r.get(1).asInt(), r.get(2).asLong(), r.get(3).asLong()));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("ranges are not JSON", e);
        }
        return out;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new RangeReaderFactory(settings);
    }
}
