package io.strongroom.dataplane.keys;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The subject keys one key service handed to this executor, shared by its tasks across chunks and batches,
 * so that a chunk asks the driver only for what the executor does not hold yet.
 *
 * <p>What keeps it safe:
 * <ul>
 * <li><b>Erasure.</b> Every answer of the service carries its erasure generation and the key ids erased since
 * the generation this executor sent ({@code strongroom/keys/erasure_feed.py}); {@link KeyServiceClient}
 * applies them here before the answer is used, so a cached key erased before a chunk's request is never used
 * for that chunk. {@code reset} (the erased keys can no longer be listed) empties the cache. Keys from an
 * answer older than an erasure already applied are used for their chunk only, never cached.</li>
 * <li><b>Usage limits.</b> A sealing key is cached with a seal allowance the driver charged to the key's usage
 * limit ({@code KeyManager.charge}); a chunk takes its seals from it under this object's lock, so each charged
 * seal is used once, whatever the number of tasks. An allowance left unused when the executor ends is wasted,
 * never handed to anyone else (the safe side, as a writer's unused lease).</li>
 * <li><b>Age.</b> An entry is used for {@link #MAX_AGE_NANOS} at most, then the driver is asked again: a key
 * past its maximum age, or a subject's newer key, is picked up within that time.</li>
 * <li><b>Memory.</b> At most {@link #MAX_KEYS} keys of each kind per service and {@link #MAX_SERVICES}
 * services; an evicted key's bytes are overwritten. Callers get copies, which they overwrite after the
 * chunk.</li>
 * </ul>
 */
public final class ExecutorKeys {
    public static final int MAX_KEYS = 100_000;
    public static final long MAX_AGE_NANOS = TimeUnit.MINUTES.toNanos(5);
    static final int MAX_SERVICES = 4;
    /** No generation yet: the first request asks without one. */
    public static final long UNKNOWN = -1;

    private static final Map<String, ExecutorKeys> SERVICES = new LinkedHashMap<>(8, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, ExecutorKeys> eldest) {
            if (size() > MAX_SERVICES) {
                eldest.getValue().forgetAll();
                return true;
            }
            return false;
        }
    };

    /** A key as handed out: the caller's own copies. */
    public record Key(byte[] keyId, byte[] dek) {
    }

    private static final class Entry {
        final byte[] keyId;
        final byte[] dek;
        final long born;
        long seals;

        Entry(byte[] keyId, byte[] dek, long born, long seals) {
            this.keyId = keyId.clone();
            this.dek = dek.clone();
            this.born = born;
            this.seals = seals;
        }
    }

    private final Map<String, Entry> sealing = bounded();
    private final Map<String, Entry> opening = bounded();
    private long generation = UNKNOWN;

    private ExecutorKeys() {
    }

    /** The keys of the service {@code spec} names (its address and a digest of its token). */
    public static ExecutorKeys of(KeyServiceSpec spec) {
        String id = spec.host() + ":" + spec.port() + "/" + digest(spec.token());
        synchronized (SERVICES) {
            return SERVICES.computeIfAbsent(id, k -> new ExecutorKeys());
        }
    }

    private static String digest(String token) {
        try {
            byte[] hash = MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.US_ASCII));
            return Base64.getEncoder().encodeToString(Arrays.copyOf(hash, 12));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }

    private static Map<String, Entry> bounded() {
        return new LinkedHashMap<>(1024, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Entry> eldest) {
                if (size() > MAX_KEYS) {
                    Arrays.fill(eldest.getValue().dek, (byte) 0);
                    return true;
                }
                return false;
            }
        };
    }

    /** The generation to send with the next request, or {@link #UNKNOWN}. */
    public synchronized long generation() {
        return generation;
    }

    /** An answer's erasures: drop the keys erased since (all of them on {@code reset}). */
    public synchronized void follow(long answered, Collection<byte[]> erased, boolean reset) {
        if (reset) {
            forgetAll();
            generation = answered;
            return;
        }
        if (!erased.isEmpty()) {
            Set<ByteBuffer> ids = new HashSet<>();
            for (byte[] id : erased) {
                ids.add(ByteBuffer.wrap(id));
            }
            drop(sealing, ids);
            drop(opening, ids);
        }
        generation = Math.max(generation, answered);
    }

    private static void drop(Map<String, Entry> entries, Set<ByteBuffer> ids) {
        for (Iterator<Entry> it = entries.values().iterator(); it.hasNext();) {
            Entry entry = it.next();
            if (ids.contains(ByteBuffer.wrap(entry.keyId))) {
                Arrays.fill(entry.dek, (byte) 0);
                it.remove();
            }
        }
    }

    /** Whether {@link #takeSeals} would serve this now (a hint: erasures may still remove it). */
    public synchronized boolean canSeal(String topic, String subject, long seals, long now) {
        return usable(sealing.get(sealingKey(topic, subject)), seals, now);
    }

    /** The subject's key with {@code seals} taken from its allowance, or null (none, too few seals, too old). */
    public synchronized Key takeSeals(String topic, String subject, long seals, long now) {
        Entry entry = sealing.get(sealingKey(topic, subject));
        if (!usable(entry, seals, now)) {
            return null;
        }
        entry.seals -= seals;
        return new Key(entry.keyId.clone(), entry.dek.clone());
    }

    /** Keep a key the driver charged {@code seals} more seals to than its chunk uses, if no erasure is newer. */
    public synchronized void keepSeals(String topic, String subject, byte[] keyId, byte[] dek, long seals,
            long answered, long now) {
        if (answered == UNKNOWN || answered != generation || seals <= 0) {
            return;
        }
        put(sealing, sealingKey(topic, subject), new Entry(keyId, dek, now, seals));
    }

    /** Whether {@link #openKey} would serve this now (a hint: erasures may still remove it). */
    public synchronized boolean canOpen(byte[] keyId, String subject, long now) {
        return usable(opening.get(openingKey(keyId, subject)), 0, now);
    }

    /** A copy of the available key {@code keyId} for records of {@code subject}, or null. */
    public synchronized byte[] openKey(byte[] keyId, String subject, long now) {
        Entry entry = opening.get(openingKey(keyId, subject));
        return usable(entry, 0, now) ? entry.dek.clone() : null;
    }

    /** Keep an available key from an answer, if no erasure is newer than the answer. */
    public synchronized void keepOpen(byte[] keyId, String subject, byte[] dek, long answered, long now) {
        if (answered == UNKNOWN || answered != generation) {
            return;
        }
        put(opening, openingKey(keyId, subject), new Entry(keyId, dek, now, 0));
    }

    /** Held, with {@code seals} seals left at least, and younger than {@link #MAX_AGE_NANOS}. */
    private static boolean usable(Entry entry, long seals, long now) {
        return entry != null && entry.seals >= seals && now - entry.born < MAX_AGE_NANOS;
    }

    private static void put(Map<String, Entry> entries, String id, Entry entry) {
        Entry old = entries.put(id, entry);
        if (old != null) {
            Arrays.fill(old.dek, (byte) 0);
        }
    }

    /** Keys held, sealing and opening (for tests and metrics). */
    public synchronized int size() {
        return sealing.size() + opening.size();
    }

    /** Forget every key (their bytes overwritten). */
    public synchronized void forgetAll() {
        for (Entry entry : sealing.values()) {
            Arrays.fill(entry.dek, (byte) 0);
        }
        for (Entry entry : opening.values()) {
            Arrays.fill(entry.dek, (byte) 0);
        }
        sealing.clear();
        opening.clear();
    }

    /** Topic names hold no NUL, so the pair is unambiguous. */
    private static String sealingKey(String topic, String subject) {
        return topic + '\u0000' + subject;
    }

    private static String openingKey(byte[] keyId, String subject) {
        return Base64.getEncoder().encodeToString(keyId) + '\u0000' + subject;
    }
}
