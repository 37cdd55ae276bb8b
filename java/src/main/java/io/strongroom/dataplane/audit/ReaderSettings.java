package io.strongroom.dataplane.audit;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The source's options, parsed and validated once on the driver and shipped to the executors: the same names and
 * defaults as the Python {@code strongroom-kafka} source ({@code strongroom.audit.datasource}), except that the
 * {@code kafka.*} options are Java client properties.
 */
final class ReaderSettings implements Serializable {
    private static final long serialVersionUID = 1L;
    static final String SOURCE = "the strongroom JVM audit reader";

    /** What the reader returns. */
    enum Output {
        /** One row per record (hashes, never content), plus optional digest rows and range markers. */
        ROWS,
        /** One row per chunk digest plus the range markers: the records stay in the executor. */
        DIGESTS
    }

    final TreeMap<String, String> connection = new TreeMap<>();
    final List<String> topics = new ArrayList<>();
    final String ranges;
    final String starting;
    final String ending;
    final long maxRecords;
    final int minRanges;
    final boolean emitRanges;
    final boolean emitDigests;
    final String isolation;
    final double idleTimeoutSeconds;
    final double eofGraceSeconds;
    final Output output;
    final long chunkSize;

    ReaderSettings(Map<String, String> options) {
        Map<String, String> opts = new TreeMap<>();
        options.forEach((k, v) -> opts.put(k.toLowerCase(Locale.ROOT), v));
        opts.forEach((k, v) -> {
            if (k.startsWith("kafka.")) {
                connection.put(k.substring("kafka.".length()), v);
            }
        });
        if (!connection.containsKey("bootstrap.servers")) {
            throw new IllegalArgumentException(SOURCE + " needs the kafka.bootstrap.servers option "
                    + "(add .option(\"kafka.bootstrap.servers\", \"host:9092\"))");
        }
        for (String t : opts.getOrDefault("topics", "").split(",")) {
            if (!t.isBlank()) {
                topics.add(t.strip());
            }
        }
        ranges = opts.get("ranges");
        if (topics.isEmpty() && ranges == null) {
            throw new IllegalArgumentException(SOURCE + " needs the topics option (add .option(\"topics\", \"a,b\"))");
        }
        starting = opts.getOrDefault("startingoffsets", "earliest");
        ending = opts.getOrDefault("endingoffsets", "latest");
        maxRecords = positive(opts, "maxrecordsperrange", "500000");
        minRanges = (int) positive(opts, "minranges", "1");
        emitRanges = flag(opts, "emitranges");
        emitDigests = flag(opts, "emitdigests");
        isolation = opts.getOrDefault("isolation", "read_committed");
        if (!isolation.equals("read_committed") && !isolation.equals("read_uncommitted")) {
            throw new IllegalArgumentException("isolation '" + isolation + "' is not supported "
                    + "(use read_committed or read_uncommitted)");
        }
        idleTimeoutSeconds = seconds(opts, "idletimeoutseconds", "60");
        eofGraceSeconds = seconds(opts, "eofgraceseconds", "30");
        String out = opts.getOrDefault("output", "rows");
        output = switch (out) {
            case "rows" -> Output.ROWS;
            case "digests" -> Output.DIGESTS;
            default -> throw new IllegalArgumentException("output '" + out + "' is not supported (use rows or digests)");
        };
        chunkSize = positive(opts, "chunksize", "10000");
    }

    /** Settings of an admin client: the connection only. */
    Properties adminProperties() {
        Properties props = new Properties();
        props.putAll(connection);
        props.putIfAbsent("client.id", "strongroom-audit-planner");
        return props;
    }

    /** Settings of an executor's assigned consumer: no group, no commits, no silent offset reset. */
    Properties consumerProperties() {
        Properties props = new Properties();
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "none");
        props.put("isolation.level", isolation);
        props.put("fetch.max.bytes", String.valueOf(64 * 1024 * 1024));
        props.put("max.partition.fetch.bytes", String.valueOf(16 * 1024 * 1024));
        props.put("max.poll.records", "20000");
        props.put("fetch.max.wait.ms", "100");
        props.put("receive.buffer.bytes", String.valueOf(4 * 1024 * 1024));
        // A corrupt stored record must reach the scrub as "altered", as with the Python reader, not fail the read.
        props.put("check.crcs", "false");
        props.put("reconnect.backoff.ms", "250");
        props.put("reconnect.backoff.max.ms", "5000");
        props.put("client.id", "strongroom-audit-reader");
        props.putAll(connection);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.remove("group.id");
        return props;
    }

    private static boolean flag(Map<String, String> opts, String name) {
        return opts.getOrDefault(name, "false").equalsIgnoreCase("true");
    }

    private static long positive(Map<String, String> opts, String name, String fallback) {
        String raw = opts.getOrDefault(name, fallback);
        try {
            long value = Long.parseLong(raw.strip());
            if (value >= 1) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("option " + name + " must be a whole number >= 1, not '" + raw + "'");
    }

    private static double seconds(Map<String, String> opts, String name, String fallback) {
        String raw = opts.getOrDefault(name, fallback);
        try {
            double value = Double.parseDouble(raw.strip());
            if (value >= 0 && Double.isFinite(value)) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("option " + name + " must be a number of seconds >= 0, not '" + raw + "'");
    }
}
