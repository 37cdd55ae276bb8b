package io.strongroom.dataplane.codec;

/**
 * The fields of an envelope. {@code header} is every byte before the nonce (it is part of the AAD);
 * {@code ciphertext} is the ciphertext followed by the 16-byte tag. The arrays are owned by the record.
 */
public record ParsedEnvelope(KeyRef keyRef, AadProfile profile, byte[] header, byte[] nonce, byte[] ciphertext) {
}
