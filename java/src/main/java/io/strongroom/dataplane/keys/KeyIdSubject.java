package io.strongroom.dataplane.keys;

import java.util.Arrays;

/**
 * A subject key id with the subject whose records it opens: how an opening key is asked for and held. Equal by
 * content (a record with a {@code byte[]} component would compare the arrays by identity); the hash is computed
 * once, so a chunk's maps hash each pair once instead of encoding it into a string per lookup.
 */
public final class KeyIdSubject {
    private final byte[] keyId;
    private final String subject;
    private final int hash;

    /** {@code keyId} is kept, not copied: the caller does not change it afterwards. */
    public KeyIdSubject(byte[] keyId, String subject) {
        this.keyId = keyId;
        this.subject = subject;
        this.hash = 31 * Arrays.hashCode(keyId) + subject.hashCode();
    }

    public byte[] keyId() {
        return keyId;
    }

    public String subject() {
        return subject;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof KeyIdSubject that && hash == that.hash && subject.equals(that.subject)
                && Arrays.equals(keyId, that.keyId);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    @Override
    public String toString() {
        return "KeyIdSubject(" + io.strongroom.dataplane.codec.Hex.of(keyId) + ")"; // the subject is personal data
    }
}
