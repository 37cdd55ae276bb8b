package io.strongroom.dataplane.keys;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
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

    /** A subject's sealing key is held per source topic (its rule's KEK wraps it). */
    private record Sealing(String topic, String subject) {
    }

    private final Map<Sealing, Entry> sealing = bounded();
    private final Map<KeyIdSubject, Entry> opening = bounded();
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

    private static <K> Map<K, Entry> bounded() {
        return new LinkedHashMap<>(1024, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<K, Entry> eldest) {
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

    private static void drop(Map<?, Entry> entries, Set<ByteBuffer> ids) {
        for (Iterator<Entry> it = entries.values().iterator(); it.hasNext();) {
            Entry entry = it.next();
            if (ids.contains(ByteBuffer.wrap(entry.keyId))) {
                Arrays.fill(entry.dek, (byte) 0);
                it.remove();
            }
        }
    }

    /**
     * The subjects of {@code seals} (seals each subject's records make) that {@link #takeSeals} would not serve now:
     * none held, too few seals left, too old. A hint, read before a request: its answer's erasures may still remove
     * held keys.
     */
    public synchronized Map<String, Integer> unservable(String topic, Map<String, Integer> seals, long now) {
        Map<String, Integer> missing = new LinkedHashMap<>();
        seals.forEach((subject, count) -> {
            if (!usable(sealing.get(new Sealing(topic, subject)), count, now)) {
                missing.put(subject, count);
            }
        });
        return missing;
    }

    /**
     * Each subject's held key with its seals taken from the key's allowance, for the subjects it can serve (the rest
     * are left out: none held, too few seals, too old). Copies, which the caller overwrites after use.
     */
    public synchronized Map<String, Key> takeSeals(String topic, Map<String, Integer> seals, long now) {
        Map<String, Key> taken = new HashMap<>(2 * seals.size());
        seals.forEach((subject, count) -> {
            Entry entry = sealing.get(new Sealing(topic, subject));
            if (usable(entry, count, now)) {
                entry.seals -= count;
                taken.put(subject, new Key(entry.keyId.clone(), entry.dek.clone()));
            }
        });
        return taken;
    }

    /** Keep a key the driver charged {@code seals} more seals to than its chunk uses, if no erasure is newer. */
    public synchronized void keepSeals(String topic, String subject, byte[] keyId, byte[] dek, long seals,
            long answered, long now) {
        if (answered == UNKNOWN || answered != generation || seals <= 0) {
            return;
        }
        put(sealing, new Sealing(topic, subject), new Entry(keyId, dek, now, seals));
    }

    /** The pairs of {@code wanted} that {@link #openKeys} would not serve now (a hint, as {@link #unservable}). */
    public synchronized List<KeyIdSubject> unopenable(Collection<KeyIdSubject> wanted, long now) {
        List<KeyIdSubject> missing = new ArrayList<>();
        for (KeyIdSubject pair : wanted) {
            if (!usable(opening.get(pair), 0, now)) {
                missing.add(pair);
            }
        }
        return missing;
    }

    /** Copies of the available keys of {@code wanted} this executor holds (the rest are left out). */
    public synchronized Map<KeyIdSubject, byte[]> openKeys(Collection<KeyIdSubject> wanted, long now) {
        Map<KeyIdSubject, byte[]> found = new HashMap<>(2 * wanted.size());
        for (KeyIdSubject pair : wanted) {
            Entry entry = opening.get(pair);
            if (usable(entry, 0, now)) {
                found.put(pair, entry.dek.clone());
            }
        }
        return found;
    }

    /** Keep an available key from an answer, if no erasure is newer than the answer. */
    public synchronized void keepOpen(KeyIdSubject pair, byte[] dek, long answered, long now) {
        if (answered == UNKNOWN || answered != generation) {
            return;
        }
        put(opening, new KeyIdSubject(pair.keyId().clone(), pair.subject()), new Entry(pair.keyId(), dek, now, 0));
    }

    /** Held, with {@code seals} seals left at least, and younger than {@link #MAX_AGE_NANOS}. */
    private static boolean usable(Entry entry, long seals, long now) {
        return entry != null && entry.seals >= seals && now - entry.born < MAX_AGE_NANOS;
    }

    private static <K> void put(Map<K, Entry> entries, K id, Entry entry) {
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
}
