package io.strongroom.dataplane.codec;

/**
 * How an envelope names its data key: a per-subject key id or a wrapped DEK. {@link #encoded()} is the
 * key-ref bytes as they appear in the envelope; {@link #header(AadProfile)} every byte before the nonce.
 */
public sealed interface KeyRef permits SubjectKeyRef, WrappedDekRef {
    byte kind();

    byte[] encoded();

    /** Every envelope byte before the nonce, for this key and AAD profile (a fresh array). */
    default byte[] header(AadProfile profile) {
        byte[] encoded = encoded();
        byte[] header = new byte[encoded.length + 5];
        header[0] = WireIds.MAGIC;
        header[1] = WireIds.FORMAT_V1;
        header[2] = WireIds.CIPHER_AES_256_GCM;
        header[3] = kind();
        System.arraycopy(encoded, 0, header, 4, encoded.length);
        header[header.length - 1] = profile.id();
        return header;
    }
}
