package io.strongroom.dataplane.codec;

import java.util.Arrays;

/** Reference to a per-subject key by its random 16-byte id (crypto-shredding: erase the key, the data is gone). */
public final class SubjectKeyRef implements KeyRef {
    private final byte[] keyId;

    public SubjectKeyRef(byte[] keyId) {
        if (keyId == null || keyId.length != WireIds.SUBJECT_KEY_ID_SIZE) {
            String size = keyId == null ? "null" : String.valueOf(keyId.length);
            throw new EnvelopeException(ErrorKind.INVALID_KEY_REF,
                    "a subject key id is " + WireIds.SUBJECT_KEY_ID_SIZE + " bytes, got " + size);
        }
        this.keyId = keyId.clone();
    }

    public byte[] keyId() {
        return keyId.clone();
    }

    @Override
    public byte kind() {
        return WireIds.KIND_SUBJECT_KEY;
    }

    @Override
    public byte[] encoded() {
        return keyId.clone();
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof SubjectKeyRef ref && Arrays.equals(ref.keyId, keyId);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(keyId);
    }

    @Override
    public String toString() {
        return "SubjectKeyRef(key_id=" + Hex.of(keyId) + ")";
    }
}
