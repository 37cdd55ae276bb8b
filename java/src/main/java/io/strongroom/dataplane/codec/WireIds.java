package io.strongroom.dataplane.codec;

import java.nio.charset.StandardCharsets;

/**
 * The wire-format constants of version 1, mirrored from {@code strongroom/envelope/ids.py} (the registry:
 * forever once released, never reused). docs/wire-format.md specifies every byte.
 */
public final class WireIds {
    public static final String RECORD_HEADER_NAME = "strongroom.enc";
    public static final byte MAGIC = (byte) 0xF5;
    public static final byte FORMAT_V1 = 0x01;
    public static final byte CIPHER_AES_256_GCM = 0x01;
    public static final byte KIND_SUBJECT_KEY = 0x01;
    public static final byte KIND_WRAPPED_DEK = 0x02;
    public static final String FIELD_PREFIX = "sr1:";
    public static final int SUBJECT_KEY_ID_SIZE = 16;
    public static final int NONCE_SIZE = 12;
    public static final int TAG_SIZE = 16;
    public static final int KEY_SIZE = 32;
    public static final int MAX_U16 = 0xFFFF;

    private static final byte[] AAD_LABEL = "strongroom/v1".getBytes(StandardCharsets.US_ASCII);

    private WireIds() {
    }

    /** {@code "strongroom/v1"}, the first bytes of every AAD (a fresh copy). */
    public static byte[] aadLabel() {
        return AAD_LABEL.clone();
    }
}
