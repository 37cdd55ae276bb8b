package io.strongroom.dataplane.audit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * Streaming offsets {@code {"topic": {"partition": next offset}}} - the JSON the Python source keeps in Spark's
 * checkpoint, so a capture started with the Python reader resumes with this one. Sorted, so equal offsets render
 * as equal JSON (Spark compares offsets by their JSON).
 */
final class KafkaOffsets extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();
    final TreeMap<String, TreeMap<String, Long>> offsets;

    KafkaOffsets(TreeMap<String, TreeMap<String, Long>> offsets) {
        this.offsets = offsets;
    }

    static KafkaOffsets parse(String json) {
        TreeMap<String, TreeMap<String, Long>> out = new TreeMap<>();
        try {
            JsonNode root = JSON.readTree(json);
            if (root == null || !root.isObject()) {
                throw new IllegalArgumentException("offsets must be a JSON object {topic: {partition: offset}}, not "
                        + json);
            }
            for (Iterator<Map.Entry<String, JsonNode>> ts = root.fields(); ts.hasNext();) {
                Map.Entry<String, JsonNode> topic = ts.next();
                TreeMap<String, Long> parts = new TreeMap<>();
                for (Iterator<Map.Entry<String, JsonNode>> ps = topic.getValue().fields(); ps.hasNext();) {
                    Map.Entry<String, JsonNode> p = ps.next();
                    parts.put(String.valueOf(Integer.parseInt(p.getKey())), p.getValue().asLong());
                }
                out.put(topic.getKey(), parts);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("offsets are not JSON: " + json, e);
        }
        return new KafkaOffsets(out);
    }

    long get(String topic, String partition, long fallback) {
        TreeMap<String, Long> parts = offsets.get(topic);
        Long found = parts == null ? null : parts.get(partition);
        return found == null ? fallback : found;
    }

    @Override
    public String json() {
        ObjectNode root = JSON.createObjectNode();
        offsets.forEach((topic, parts) -> {
            ObjectNode node = root.putObject(topic);
            parts.forEach(node::put);
        });
        return root.toString();
    }
}
