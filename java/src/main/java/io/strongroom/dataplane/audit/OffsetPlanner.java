package io.strongroom.dataplane.audit;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The driver's questions to the cluster: the partitions of the audited topics and their first or (committed)
 * end offsets - {@code _Settings.resolve} of the Python source. A partition whose leader does not answer in time
 * is left out (the capture's catch-up rounds and the never-backwards streaming end cover it).
 */
final class OffsetPlanner implements AutoCloseable {
    private static final long TIMEOUT_MS = 15_000;
    private final ReaderSettings settings;
    private final Admin admin;

    OffsetPlanner(ReaderSettings settings) {
        this.settings = settings;
        this.admin = Admin.create(settings.adminProperties());
    }

    /** {@code earliest}, {@code latest} or JSON offsets as offsets of every partition of the topics. */
    KafkaOffsets resolve(String spec, boolean start) {
        List<TopicPartition> partitions = partitions();
        KafkaOffsets explicit = new KafkaOffsets(new TreeMap<>());
        String which = spec;
        if (!spec.equals("earliest") && !spec.equals("latest")) {
            explicit = KafkaOffsets.parse(spec);
            which = start ? "earliest" : "latest";
        }
        Map<TopicPartition, Long> found = list(partitions, which.equals("earliest") ? OffsetSpec.earliest()
                : OffsetSpec.latest());
        TreeMap<String, TreeMap<String, Long>> out = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            String p = String.valueOf(tp.partition());
            long given = explicit.get(tp.topic(), p, -1);
            Long listed = found.get(tp);
            if (given >= 0) {
                out.computeIfAbsent(tp.topic(), k -> new TreeMap<>()).put(p, given);
            } else if (listed != null) {
                out.computeIfAbsent(tp.topic(), k -> new TreeMap<>()).put(p, listed);
            }
        }
        return new KafkaOffsets(out);
    }

    /** The ranges between two sets of offsets, split for parallel reads. */
    List<RangePartition> plan(KafkaOffsets start, KafkaOffsets end) {
        List<RangePartition> ranges = new ArrayList<>();
        end.offsets.forEach((topic, parts) -> parts.forEach((p, e) -> {
            long s = start.get(topic, p, 0);
            if (e > s) {
                ranges.add(new RangePartition(topic, Integer.parseInt(p), s, e));
            }
        }));
        return RangePlan.plan(ranges, settings.maxRecords, settings.minRanges);
    }

    private List<TopicPartition> partitions() {
        List<TopicPartition> out = new ArrayList<>();
        try {
            Map<String, TopicDescription> topics = admin.describeTopics(settings.topics).allTopicNames()
                    .get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            for (String topic : settings.topics) {
                for (TopicPartitionInfo info : topics.get(topic).partitions()) {
                    out.add(new TopicPartition(topic, info.partition()));
                }
            }
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                throw new IllegalArgumentException("a topic of " + settings.topics + " does not exist on "
                        + settings.connection.get("bootstrap.servers") + " (check the topic names)", e.getCause());
            }
            throw new AuditReadException("cannot describe topics " + settings.topics + ": " + e.getCause(), e);
        } catch (TimeoutException e) {
            throw new AuditReadException("no broker described topics " + settings.topics + " in "
                    + TIMEOUT_MS / 1000 + "s (check kafka.bootstrap.servers)", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AuditReadException("interrupted while describing topics", e);
        }
        return out;
    }

    /** Offsets per partition, retried until the deadline; partitions whose leader never answers are left out. */
    private Map<TopicPartition, Long> list(List<TopicPartition> partitions, OffsetSpec spec) {
        IsolationLevel isolation = settings.isolation.equals("read_committed") ? IsolationLevel.READ_COMMITTED
                : IsolationLevel.READ_UNCOMMITTED;
        Map<TopicPartition, Long> found = new HashMap<>();
        List<TopicPartition> pending = new ArrayList<>(partitions);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
        long delay = 100;
        while (!pending.isEmpty()) {
            Map<TopicPartition, OffsetSpec> request = new HashMap<>();
            pending.forEach(tp -> request.put(tp, spec));
            ListOffsetsResult result = admin.listOffsets(request,
                    new ListOffsetsOptions(isolation).timeoutMs((int) TIMEOUT_MS));
            List<TopicPartition> retry = new ArrayList<>();
            for (TopicPartition tp : pending) {
                try {
                    found.put(tp, result.partitionResult(tp).get(TIMEOUT_MS, TimeUnit.MILLISECONDS).offset());
                } catch (ExecutionException | TimeoutException e) {
                    retry.add(tp); // no leader yet, leader moving: asked again below
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AuditReadException("interrupted while listing offsets", e);
                }
            }
            pending = retry;
            if (pending.isEmpty() || System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(delay) > deadline) {
                break;
            }
            sleep(delay);
            delay = Math.min(2_000, delay * 2);
        }
        return found;
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AuditReadException("interrupted while listing offsets", e);
        }
    }

    @Override
    public void close() {
        admin.close();
    }
}
