package io.strongroom.dataplane.codec;

import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;

/**
 * Random 96-bit nonces from a per-instance NIST SP 800-90A DRBG ({@code SecureRandom.getInstance("DRBG")},
 * seeded by the JDK from the OS entropy source). One instance per task: no lock is shared between
 * tasks, and the DEK usage limits keep the birthday bound of random nonces far away.
 */
public final class DrbgNonceSource implements NonceSource {
    private final SecureRandom random;

    public DrbgNonceSource() {
        try {
            this.random = SecureRandom.getInstance("DRBG");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no DRBG SecureRandom (Java 9+ has one)", e);
        }
    }

    @Override
    public byte[] nextNonce() {
        byte[] nonce = new byte[WireIds.NONCE_SIZE];
        random.nextBytes(nonce);
        return nonce;
    }
}
