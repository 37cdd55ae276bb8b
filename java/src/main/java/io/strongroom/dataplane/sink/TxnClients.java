package io.strongroom.dataplane.sink;

import java.time.Duration;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;

/**
 * The Kafka clients of one source partition's transactions: a transactional producer and the consumer that reads the
 * group's committed offset. A task takes them for its partition and gives them back after its transaction ended
 * (committed or aborted), so the next micro-batch's task on this executor finds them ready, as Spark's own Kafka sink
 * keeps its producers. A new producer costs a coordinator lookup and {@code initTransactions}, and its first
 * transaction fetches the output topics' metadata again: about 300 ms per partition and micro-batch here, against
 * about 50 ms with the clients kept.
 *
 * <p>Kept clients are only trusted after a check. The producer may have been fenced meanwhile: another task (on another
 * executor, or the Python engine) took the transactional id and may have committed. So {@link #take} reads the committed
 * offset, begins a transaction and sends that offset into it: a fenced producer fails there, before any record is sent,
 * and is replaced by a new one whose {@code initTransactions} fences the other holder and ends its open transaction
 * (the committed offset is then read again). A client is only given back after its transaction ended without error;
 * anything else closes it. Idle clients are closed after {@link #IDLE_NANOS}, at most {@link #MAX_IDLE} are kept, and
 * {@link #closeIdle} closes a pipeline's (the driver calls it when the pipeline closes).
 */
final class TxnClients {
    static final long IDLE_NANOS = TimeUnit.SECONDS.toNanos(60);
    /** Each kept producer holds its pooled batch buffers (a few MB with the sink's 1 MB batches). */
    static final int MAX_IDLE = 32;

    /** Idle clients by their configuration (bootstrap, security, transactional id, group), oldest first. */
    private static final Map<List<Map<String, Object>>, TxnClients> IDLE = new LinkedHashMap<>();
    private static ScheduledExecutorService sweeper;
    /** Clients created in this JVM so far (for tests: whether a batch found kept ones). */
    private static final java.util.concurrent.atomic.AtomicLong CREATED = new java.util.concurrent.atomic.AtomicLong();

    final KafkaProducer<byte[], byte[]> producer;
    final KafkaConsumer<byte[], byte[]> consumer;
    private final List<Map<String, Object>> key;
    private long idleSince;

    private TxnClients(List<Map<String, Object>> key) {
        this.key = key;
        CREATED.incrementAndGet();
        this.producer = new KafkaProducer<>(key.get(0));
        try {
            producer.initTransactions(); // fences zombies, finishes their open transaction
            this.consumer = new KafkaConsumer<>(key.get(1));
        } catch (RuntimeException e) {
            producer.close(Duration.ZERO);
            throw e;
        }
    }

    /** What {@link #take} hands a task: the clients, the group's committed offset (-1: none), a transaction begun. */
    record Taken(TxnClients clients, long committed) {
    }

    /** The clients of a source partition, with the group's committed offset read and a transaction begun. */
    static Taken take(SinkSettings settings, String topic, int partition) {
        List<Map<String, Object>> key = List.of(settings.producerConfig(topic, partition), settings.consumerConfig());
        TopicPartition source = new TopicPartition(topic, partition);
        TxnClients kept;
        synchronized (IDLE) {
            kept = IDLE.remove(key); // a task holds its clients alone
        }
        if (kept != null) {
            try {
                long committed = kept.committed(source);
                kept.producer.beginTransaction();
                // still the holder of the transactional id? A fenced producer fails here, before any record is sent
                kept.producer.sendOffsetsToTransaction(Map.of(source, new OffsetAndMetadata(Math.max(committed, 0))),
                        new ConsumerGroupMetadata(settings.groupId()));
                return new Taken(kept, committed);
            } catch (RuntimeException e) { // a KafkaException, or a producer left in a state it cannot begin from
                quietlyClose(kept); // fenced, or its connections broke: a new producer takes the id over
            }
        }
        TxnClients fresh = new TxnClients(key);
        try {
            long committed = fresh.committed(source); // after the fencing: no other transaction is open
            fresh.producer.beginTransaction();
            return new Taken(fresh, committed);
        } catch (RuntimeException e) {
            fresh.closeNow();
            throw e;
        }
    }

    private long committed(TopicPartition source) {
        OffsetAndMetadata found = consumer.committed(Set.of(source), Duration.ofSeconds(60)).get(source);
        return found == null ? -1 : found.offset();
    }

    /** Keep these clients for the partition's next transaction (theirs ended without error). */
    void giveBack() {
        TxnClients evicted = null;
        synchronized (IDLE) {
            idleSince = System.nanoTime();
            TxnClients replaced = IDLE.put(key, this);
            if (replaced != null && replaced != this) {
                evicted = replaced; // two tasks of one partition at once: the later one is kept
            } else if (IDLE.size() > MAX_IDLE) {
                Iterator<TxnClients> oldest = IDLE.values().iterator();
                evicted = oldest.next();
                oldest.remove();
            }
            startSweeper();
        }
        if (evicted != null) {
            quietlyClose(evicted); // the task's own transaction is committed: closing another's never fails it
        }
    }

    /** Close them now (a failed transaction, a stop, or clients not kept). */
    void closeNow() {
        try {
            producer.close(Duration.ZERO);
        } finally {
            consumer.close(Duration.ZERO);
        }
    }

    /** Close the idle clients of the consumer group {@code groupId}: one pipeline's (it closed); null: all. */
    static void closeIdle(String groupId) {
        closeWhere(idle -> groupId == null || groupId.equals(idle.key.get(1).get(ConsumerConfig.GROUP_ID_CONFIG)));
    }

    /** Close the idle clients {@code doomed} picks. */
    private static void closeWhere(java.util.function.Predicate<TxnClients> doomed) {
        List<TxnClients> closing = new java.util.ArrayList<>();
        synchronized (IDLE) {
            for (Iterator<TxnClients> it = IDLE.values().iterator(); it.hasNext();) {
                TxnClients idle = it.next();
                if (doomed.test(idle)) {
                    closing.add(idle);
                    it.remove();
                }
            }
        }
        for (TxnClients idle : closing) {
            quietlyClose(idle);
        }
    }

    private static void quietlyClose(TxnClients clients) {
        try {
            clients.closeNow();
        } catch (RuntimeException e) {
            // closing a client whose brokers are gone: nothing left to release
        }
    }

    /** Clients created in this JVM so far (for tests). */
    static long createdCount() {
        return CREATED.get();
    }

    /** Number of idle clients (for tests). */
    static int idleCount() {
        synchronized (IDLE) {
            return IDLE.size();
        }
    }

    private static void startSweeper() {
        if (sweeper == null) {
            sweeper = Executors.newSingleThreadScheduledExecutor(task -> {
                Thread thread = new Thread(task, "strongroom-txn-clients-sweeper");
                thread.setDaemon(true);
                return thread;
            });
            long period = TimeUnit.NANOSECONDS.toSeconds(IDLE_NANOS) / 4;
            sweeper.scheduleWithFixedDelay(() -> {
                long now = System.nanoTime();
                closeWhere(idle -> now - idle.idleSince >= IDLE_NANOS);
            }, period, period, TimeUnit.SECONDS);
        }
    }
}
