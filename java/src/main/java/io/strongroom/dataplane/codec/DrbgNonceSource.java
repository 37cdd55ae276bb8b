package io.strongroom.dataplane.codec;

import java.nio.charset.StandardCharsets;
import java.security.DrbgParameters;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;

/**
 * Random 96-bit nonces from a per-instance NIST SP 800-90A DRBG ({@code SecureRandom.getInstance("DRBG")},
 * the JDK's Hash_DRBG at 256-bit strength with a personalization string, seeded from the OS entropy
 * source). One instance per task: no lock is shared between tasks, and the DEK usage limits keep the
 * birthday bound of random nonces far away. The DRBG is asked for 256 nonces at a time (one generate call instead
 * of one per record: the same output stream, each nonce handed out once).
 */
public final class DrbgNonceSource implements NonceSource {
    private static final byte[] PERSONALIZATION = "strongroom/v1 envelope nonces".getBytes(StandardCharsets.US_ASCII);

    private static final int BATCH = 256;

    private final SecureRandom random;
    private final byte[] batch = new byte[BATCH * WireIds.NONCE_SIZE];
    private int next = batch.length;

    public DrbgNonceSource() {
        try {
            this.random = SecureRandom.getInstance("DRBG",
                    DrbgParameters.instantiation(256, DrbgParameters.Capability.RESEED_ONLY, PERSONALIZATION));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no DRBG SecureRandom (Java 9+ has one)", e);
        }
    }

    @Override
    public synchronized byte[] nextNonce() {
        if (next == batch.length) {
            random.nextBytes(batch);
            next = 0;
        }
        byte[] nonce = java.util.Arrays.copyOfRange(batch, next, next + WireIds.NONCE_SIZE);
        next += WireIds.NONCE_SIZE;
        return nonce;
    }
}
