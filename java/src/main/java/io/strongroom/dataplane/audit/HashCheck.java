package io.strongroom.dataplane.audit;

import java.util.List;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Test support: the reader's content hashes of a record given as plain values (called through py4j by the
 * equality tests against {@code strongroom.audit.hashing}).
 */
public final class HashCheck {
    private HashCheck() {
    }

    /** {@code [key hash, value hash, headers hash]}; {@code names} null for a record without headers. */
    public static byte[][] hashes(byte[] key, byte[] value, List<String> names, List<byte[]> values) {
        RecordHeaders headers = new RecordHeaders();
        if (names != null) {
            for (int i = 0; i < names.size(); i++) {
                headers.add(names.get(i), values.get(i));
            }
        }
        RecordHashes hashes = new RecordHashes();
        return new byte[][] {hashes.bytes(key), hashes.bytes(value), hashes.headers(headers)};
    }
}
