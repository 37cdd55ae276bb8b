package io.strongroom.dataplane.audit;

import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.unsafe.Platform;

/**
 * The 64-bit digest of one record that the scrub compares chunk by chunk: Spark's own {@code xxhash64} (seed 42,
 * each column's hash seeding the next) over {@code offset, leader epoch or -1, timestamp or -1, key/value/headers
 * hash or X'', null flags} - exactly {@code strongroom.audit.digest.record_digest()}, computed with Spark's
 * {@link XXH64} class, so the ledger side (a Spark SQL expression) and this side cannot drift apart.
 */
public final class RecordDigest {
    private static final long SEED = 42L;
    private static final byte[] EMPTY = new byte[0];

    private RecordDigest() {
    }

    /** The digest of a record's audit columns ({@code epoch} null when unknown; hashes 16 bytes or null). */
    public static long of(long offset, Integer epoch, long timestamp, byte[] keyHash, byte[] valueHash,
            byte[] headersHash) {
        long h = XXH64.hashLong(offset, SEED);
        h = XXH64.hashInt(epoch == null ? -1 : epoch, h);
        h = XXH64.hashLong(timestamp, h);
        h = binary(keyHash, h);
        h = binary(valueHash, h);
        h = binary(headersHash, h);
        int flags = (present(keyHash) ? 0 : 1) + (present(valueHash) ? 0 : 2) + (present(headersHash) ? 0 : 4);
        return XXH64.hashInt(flags, h);
    }

    /**
     * Whether a hash counts as present. The Python side marks "no hash" with 16 zero bytes, so an all-zero digest
     * (never produced by BLAKE2b in practice) counts as absent there too; kept identical here.
     */
    static boolean present(byte[] hash) {
        if (hash == null) {
            return false;
        }
        for (byte b : hash) {
            if (b != 0) {
                return true;
            }
        }
        return false;
    }

    private static long binary(byte[] hash, long seed) {
        byte[] bytes = present(hash) ? hash : EMPTY;
        return XXH64.hashUnsafeBytes(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length, seed);
    }
}
