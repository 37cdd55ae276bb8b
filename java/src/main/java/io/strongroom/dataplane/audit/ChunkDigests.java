package io.strongroom.dataplane.audit;

import java.util.Map;
import java.util.TreeMap;

/**
 * Digests of one partition's records chunk by chunk ({@code chunkSize} consecutive offsets): record count, XOR,
 * and the sums of the low and high 32-bit halves of each record's {@link RecordDigest}, plus the smallest and
 * largest offset - {@code strongroom.audit.digest.ChunkAccumulator}, value for value.
 */
final class ChunkDigests {
    /** One chunk's running digest. */
    static final class Chunk {
        long records;
        long xor;
        long lo;
        long hi;
        long minOffset = Long.MAX_VALUE;
        long maxOffset = Long.MIN_VALUE;
    }

    private final long chunkSize;
    private final TreeMap<Long, Chunk> chunks = new TreeMap<>();
    private Chunk current;
    private long currentId = Long.MIN_VALUE;

    ChunkDigests(long chunkSize) {
        if (chunkSize < 1) {
            throw new IllegalArgumentException("chunkSize must be >= 1, not " + chunkSize);
        }
        this.chunkSize = chunkSize;
    }

    void add(long offset, long digest) {
        long id = Math.floorDiv(offset, chunkSize);
        if (id != currentId) {
            currentId = id;
            current = chunks.computeIfAbsent(id, k -> new Chunk());
        }
        Chunk c = current;
        c.records++;
        c.xor ^= digest;
        c.lo += digest & 0xFFFFFFFFL;
        c.hi += digest >>> 32;
        c.minOffset = Math.min(c.minOffset, offset);
        c.maxOffset = Math.max(c.maxOffset, offset);
    }

    Map<Long, Chunk> chunks() {
        return chunks;
    }
}
