package io.strongroom.dataplane.audit;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * Assigned consumers kept between range reads in one JVM, one per (client settings, partition) in use.
 *
 * <p>A continuous capture reads every partition again each micro-batch, from where the last batch ended. A new
 * consumer per read costs its construction, a metadata round trip, connections and a fresh fetch session (a
 * large part of a small batch, and CPU the capture needs for the records); a kept one only seeks. A consumer
 * comes back only from a read that finished cleanly near the log's end (so it buffers little), is handed to one
 * read at a time, is always positioned by that read, and is closed after {@link #IDLE} unused or when more than
 * {@link #MAX_IDLE} wait. The settings (which can hold credentials) are a map key only: never logged.
 */
public final class ConsumerPool {
    static final Duration IDLE = Duration.ofSeconds(30);
    static final int MAX_IDLE = 32;

    private record Key(Map<String, String> settings, TopicPartition partition) {}

    private record Kept(Key key, KafkaConsumer<byte[], byte[]> consumer, long since) {}

    private static final Map<Key, ArrayDeque<Kept>> IDLE_CONSUMERS = new HashMap<>();

    private ConsumerPool() {}

    /** A consumer for {@code partition} with {@code props}: a kept one, or a new one; assigned to the partition. */
    static KafkaConsumer<byte[], byte[]> acquire(Properties props, TopicPartition partition) {
        Key key = key(props, partition);
        KafkaConsumer<byte[], byte[]> kept = null;
        List<Kept> expired;
        synchronized (ConsumerPool.class) {
            ArrayDeque<Kept> waiting = IDLE_CONSUMERS.get(key);
            if (waiting != null && !waiting.isEmpty()) {
                kept = waiting.pollLast().consumer();
            }
            expired = expire(System.nanoTime());
        }
        closeAll(expired);
        if (kept != null) {
            return kept;
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        consumer.assign(List.of(partition));
        return consumer;
    }

    /** Keeps a consumer whose read finished cleanly, for the next read of the same partition. */
    static void release(Properties props, TopicPartition partition, KafkaConsumer<byte[], byte[]> consumer) {
        List<Kept> expired;
        synchronized (ConsumerPool.class) {
            Key key = key(props, partition);
            IDLE_CONSUMERS.computeIfAbsent(key, k -> new ArrayDeque<>())
                    .addLast(new Kept(key, consumer, System.nanoTime()));
            expired = expire(System.nanoTime());
        }
        closeAll(expired);
    }

    /** Closes every kept consumer (tests; a JVM that ends closes its sockets anyway). */
    public static void clear() {
        List<Kept> all = new ArrayList<>();
        synchronized (ConsumerPool.class) {
            IDLE_CONSUMERS.values().forEach(all::addAll);
            IDLE_CONSUMERS.clear();
        }
        closeAll(all);
    }

    /** How many consumers wait in this JVM's pool. */
    public static synchronized int idle() {
        return IDLE_CONSUMERS.values().stream().mapToInt(ArrayDeque::size).sum();
    }

    /** Removes (under the lock) the consumers idle too long, and the oldest beyond {@link #MAX_IDLE}. */
    private static List<Kept> expire(long now) {
        List<Kept> out = new ArrayList<>();
        long limit = IDLE.toNanos();
        for (Iterator<ArrayDeque<Kept>> it = IDLE_CONSUMERS.values().iterator(); it.hasNext(); ) {
            ArrayDeque<Kept> waiting = it.next();
            while (!waiting.isEmpty() && now - waiting.peekFirst().since() > limit) {
                out.add(waiting.pollFirst());
            }
            if (waiting.isEmpty()) {
                it.remove();
            }
        }
        for (int waiting = idle(); waiting > MAX_IDLE; waiting--) {
            Kept oldest = null;
            for (ArrayDeque<Kept> queue : IDLE_CONSUMERS.values()) {
                Kept first = queue.peekFirst();
                if (first != null && (oldest == null || first.since() < oldest.since())) {
                    oldest = first;
                }
            }
            ArrayDeque<Kept> queue = IDLE_CONSUMERS.get(oldest.key());
            queue.pollFirst();
            if (queue.isEmpty()) {
                IDLE_CONSUMERS.remove(oldest.key());
            }
            out.add(oldest);
        }
        return out;
    }

    private static void closeAll(List<Kept> consumers) {
        for (Kept k : consumers) {
            try {
                k.consumer().close(Duration.ofSeconds(5));
            } catch (RuntimeException e) {
                // an idle consumer of a cluster that went away: nothing to hand back
            }
        }
    }

    private static Key key(Properties props, TopicPartition partition) {
        Map<String, String> settings = new TreeMap<>();
        props.forEach((k, v) -> settings.put(String.valueOf(k), String.valueOf(v)));
        return new Key(Map.copyOf(settings), partition);
    }
}
