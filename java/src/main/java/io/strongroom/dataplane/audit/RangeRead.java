package io.strongroom.dataplane.audit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * One range read {@code [start, end)} of one partition with an assigned Java {@code KafkaConsumer}: the loop of
 * {@code strongroom.audit.kafka_reader._RangeRead}, decision for decision.
 *
 * <p>End of range: a record at {@code end - 1} or beyond, or the consumer's position at or past {@code end}
 * (transaction markers and aborted records move it without records) - never a record count. The log ending
 * <em>short</em> of {@code end} (the consumer's lag to the high watermark, or the last stable offset under
 * read_committed, is 0) is not believed at once: a new leader's high watermark trails the old one's, so the read
 * keeps fetching for {@code eofGrace}; only if the leader then still reports an end below {@code end} is it a
 * truncation, and {@link #actualEnd()} says where the log ended. With {@code auto.offset.reset=none} a start below
 * the log start raises, and the read restarts at the log start ({@link #first()} says so). No record and no
 * movement for {@code idleTimeout} fails the read.
 */
final class RangeRead implements AutoCloseable {
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long WATERMARK_TIMEOUT_MS = 15_000;
    private static final int MAX_RESETS = 10;
    /** A consumer is kept for the next read only if it ended this close to the log's end (see {@link #close}). */
    private static final long KEEP_WITHIN_RECORDS = 20_000;

    private final ReaderSettings settings;
    private final TopicPartition tp;
    private final long start;
    private final long end;
    private final long idleNanos;
    private final long graceNanos;
    private final Properties props;
    private final boolean pooled;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private Admin admin;

    private long effectiveStart;
    private long actualEnd;
    private long position;
    private boolean done;
    private long lastProgress;
    private long shortEofAt = -1;
    private long shortEofSince;
    private int resets;

    RangeRead(ReaderSettings settings, RangePartition range) {
        this.settings = settings;
        this.tp = new TopicPartition(range.topic(), range.partition());
        this.start = range.start();
        this.end = range.end();
        this.idleNanos = (long) (settings.idleTimeoutSeconds * 1e9);
        this.graceNanos = (long) (settings.eofGraceSeconds * 1e9);
        this.effectiveStart = start;
        this.actualEnd = end;
        this.position = start;
        this.done = end <= start;
        this.props = settings.consumerProperties();
        // A kept consumer's last known end of the log can be a batch old: fine while a short end is waited out
        // (records arriving reset the wait, and the leader is asked before a truncation is believed), not when
        // the caller believes the first end it sees (no grace).
        this.pooled = graceNanos > 0;
        if (done) {
            actualEnd = start;
            consumer = null;
            return;
        }
        if (pooled) {
            consumer = ConsumerPool.acquire(props, tp);
        } else {
            consumer = new KafkaConsumer<>(props);
            consumer.assign(List.of(tp));
        }
        consumer.seek(tp, start);
        lastProgress = System.nanoTime();
    }

    /** The next records of the range in offset order, or null when the range is finished. */
    List<ConsumerRecord<byte[], byte[]>> next() {
        while (!done) {
            List<ConsumerRecord<byte[], byte[]>> fetched;
            try {
                fetched = consumer.poll(POLL).records(tp);
            } catch (OffsetOutOfRangeException e) {
                onOutOfRange();
                continue;
            } catch (KafkaException e) {
                throw new AuditReadException(where() + " at offset " + position + " failed: " + e, e);
            }
            List<ConsumerRecord<byte[], byte[]>> records = within(fetched);
            long now = System.nanoTime();
            if (!records.isEmpty()) {
                lastProgress = now;
                shortEofAt = -1;
            }
            if (!done) {
                checkEnd(now, records.isEmpty());
            }
            if (!records.isEmpty()) {
                return records;
            }
        }
        return null;
    }

    /** The fetched records below {@code end}; finishes the range at a record at {@code end - 1} or beyond. */
    private List<ConsumerRecord<byte[], byte[]>> within(List<ConsumerRecord<byte[], byte[]>> fetched) {
        int n = fetched.size();
        if (n == 0) {
            return fetched;
        }
        List<ConsumerRecord<byte[], byte[]>> out = fetched;
        if (fetched.get(n - 1).offset() >= end) {
            out = new ArrayList<>(n);
            for (ConsumerRecord<byte[], byte[]> r : fetched) {
                if (r.offset() >= end) {
                    break;
                }
                out.add(r);
            }
            done = true;
        }
        if (!out.isEmpty()) {
            long last = out.get(out.size() - 1).offset();
            position = last + 1;
            done = done || last >= end - 1;
        }
        return out;
    }

    /** After a poll: finished when the position passed {@code end}; the log-ended-short wait otherwise. */
    private void checkEnd(long now, boolean nothing) {
        long pos = consumer.position(tp, Duration.ofSeconds(5));
        if (pos > position) {
            position = pos; // markers or aborted records skipped: movement, though no record
            lastProgress = now;
        }
        if (pos >= end) {
            done = true;
            return;
        }
        OptionalLong lag = consumer.currentLag(tp);
        if (lag.isPresent() && lag.getAsLong() == 0) { // at the end of the log, short of ``end``
            if (graceNanos <= 0) {
                actualEnd = Math.max(effectiveStart, Math.min(end, pos));
                done = true;
                return;
            }
            if (shortEofAt != pos) {
                shortEofAt = pos;
                shortEofSince = now;
            }
        }
        if (nothing) {
            waitedOut(now);
        }
    }

    private void waitedOut(long now) {
        if (shortEofAt < 0) {
            if (now - lastProgress > idleNanos) {
                throw new AuditReadException("no progress reading " + tp + " at offset " + position + " (range "
                        + start + "-" + end + ") for " + Math.round(settings.idleTimeoutSeconds) + "s");
            }
            return;
        }
        long waited = now - shortEofSince;
        if (waited < graceNanos) {
            return;
        }
        long high = watermarks("ended short of offset " + end)[1];
        if (high < end) { // still short after the grace: the leader agrees the log was truncated below ``end``
            actualEnd = Math.max(effectiveStart, Math.min(end, Math.min(shortEofAt, high)));
            done = true;
            return;
        }
        if (waited >= graceNanos + idleNanos) {
            throw new AuditReadException(tp + ": the leader reports records up to offset " + high
                    + ", but none past " + position + " arrived in " + TimeUnit.NANOSECONDS.toSeconds(waited) + "s");
        }
    }

    /** Outside the log: below its start (retention, deletion) or beyond its end (truncated below the range). */
    private void onOutOfRange() {
        resets++;
        if (resets > MAX_RESETS) {
            throw new AuditReadException(tp + " keeps rejecting offset " + position + " as out of range");
        }
        long[] marks = watermarks("rejected offset " + position + " as out of range");
        long low = marks[0];
        long high = marks[1];
        if (position >= high) {
            actualEnd = Math.max(effectiveStart, Math.min(end, high));
            done = true;
            return;
        }
        effectiveStart = Math.max(effectiveStart, low);
        position = Math.max(position, effectiveStart);
        if (effectiveStart >= end) {
            actualEnd = end;
            effectiveStart = end;
            done = true;
        } else {
            consumer.seek(tp, position);
        }
    }

    /** The partition's (log start, high watermark) from its leader; {@code why} names the question. */
    private long[] watermarks(String why) {
        try {
            if (admin == null) {
                admin = Admin.create(settings.adminProperties());
            }
            long low = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)
                    .get(WATERMARK_TIMEOUT_MS, TimeUnit.MILLISECONDS).offset();
            long high = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)
                    .get(WATERMARK_TIMEOUT_MS, TimeUnit.MILLISECONDS).offset();
            return new long[] {low, high};
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new AuditReadException(tp + " " + why + ", and its leader did not report its offsets: "
                    + (e.getCause() == null ? e : e.getCause()), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AuditReadException(tp + " " + why + ", and the read was interrupted", e);
        }
    }

    private boolean nearLogEnd() {
        OptionalLong lag = consumer.currentLag(tp);
        return lag.isPresent() && lag.getAsLong() <= KEEP_WITHIN_RECORDS;
    }

    private String where() {
        return "reading " + tp;
    }

    /** The first offset the read covers (the log start, when the range began below it). */
    long first() {
        return Math.min(effectiveStart, actualEnd);
    }

    /** Where the read ended: {@code end}, or where the log really ended (a truncation). */
    long actualEnd() {
        return actualEnd;
    }

    /**
     * A read that finished near the end of the log hands its consumer to the next read of the partition (a
     * continuous capture's next batch); any other ends it, so a kept consumer buffers at most what arrived since.
     */
    @Override
    public void close() {
        if (consumer != null && pooled && done && nearLogEnd()) {
            ConsumerPool.release(props, tp, consumer);
        } else if (consumer != null) {
            consumer.close(Duration.ofSeconds(5));
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
        }
    }
}
