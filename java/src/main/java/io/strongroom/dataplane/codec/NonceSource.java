package io.strongroom.dataplane.codec;

/** Where the 12-byte nonces of an {@link EnvelopeCodec} come from. Production uses {@link DrbgNonceSource}. */
@FunctionalInterface
public interface NonceSource {
    byte[] nextNonce();
}
