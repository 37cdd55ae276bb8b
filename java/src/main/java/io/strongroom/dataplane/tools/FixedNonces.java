package io.strongroom.dataplane.tools;

import io.strongroom.dataplane.codec.NonceSource;
import io.strongroom.dataplane.codec.WireIds;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * Nonces given in advance, in order: only for re-creating frozen vectors and comparing engines byte for
 * byte in tests. A repeated nonce under one key breaks AES-GCM completely; nothing outside
 * {@link CodecTool} may use this.
 */
final class FixedNonces implements NonceSource {
    private final Iterator<byte[]> nonces;

    FixedNonces(List<byte[]> nonces) {
        this.nonces = new ArrayList<>(nonces).iterator();
    }

    @Override
    public byte[] nextNonce() {
        if (!nonces.hasNext()) {
            throw new IllegalStateException("the fixed nonces ran out");
        }
        byte[] nonce = nonces.next();
        if (nonce.length != WireIds.NONCE_SIZE) {
            throw new IllegalStateException("a fixed nonce is not 12 bytes");
        }
        return nonce;
    }
}
