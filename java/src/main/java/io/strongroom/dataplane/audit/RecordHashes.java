package io.strongroom.dataplane.audit;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.bouncycastle.crypto.digests.Blake2bDigest;

/**
 * The ledger's content hashes of one record, bit-identical to {@code strongroom.audit.hashing}: BLAKE2b with a
 * 16-byte digest of the key, of the value, and of the header list (length-prefixed names and values, a null value
 * as {@code FF FF FF FF}). A null key, a tombstone or no headers hash to null. BLAKE2b comes from Bouncy Castle
 * (shipped with Spark); the JDK has none. One instance per reader thread: it reuses its digest state.
 */
final class RecordHashes {
    static final int DIGEST_SIZE = 16;
    private static final byte[] NULL_LENGTH = {(byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff};

    private final Blake2bDigest blake = new Blake2bDigest(DIGEST_SIZE * 8);
    private final byte[] length = new byte[4];

    byte[] bytes(byte[] data) {
        if (data == null) {
            return null;
        }
        blake.update(data, 0, data.length);
        return finish();
    }

    byte[] headers(Headers headers) {
        if (headers == null) {
            return null;
        }
        boolean any = false;
        for (Header header : headers) {
            any = true;
            byte[] name = header.key().getBytes(StandardCharsets.UTF_8);
            lengthPrefixed(name);
            byte[] value = header.value();
            if (value == null) {
                blake.update(NULL_LENGTH, 0, 4);
            } else {
                lengthPrefixed(value);
            }
        }
        if (!any) {
            blake.reset();
            return null;
        }
        return finish();
    }

    private void lengthPrefixed(byte[] data) {
        int n = data.length;
        length[0] = (byte) (n >>> 24);
        length[1] = (byte) (n >>> 16);
        length[2] = (byte) (n >>> 8);
        length[3] = (byte) n;
        blake.update(length, 0, 4);
        blake.update(data, 0, n);
    }

    private byte[] finish() {
        byte[] out = new byte[DIGEST_SIZE];
        blake.doFinal(out, 0);
        return out;
    }
}
