package io.strongroom.dataplane.codec;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** Hex renderings for messages: one-byte ids and subject fingerprints (never a subject itself). */
public final class Hex {
    private static final HexFormat HEX = HexFormat.of();

    private Hex() {
    }

    /** {@code 0x0a}: how a one-byte wire id is shown in messages. */
    public static String byteId(byte id) {
        return "0x" + HEX.toHexDigits(id);
    }

    public static String of(byte[] bytes) {
        return HEX.formatHex(bytes);
    }

    public static byte[] parse(String hex) {
        return HEX.parseHex(hex);
    }

    /** {@code sha256:<first 12 hex>} of a subject, as {@code subject_fingerprint} in Python. */
    public static String fingerprint(byte[] subject) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(subject);
            return "sha256:" + HEX.formatHex(digest).substring(0, 12);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }

    /** A string for a message: quoted, cut to 40 characters. */
    public static String show(String text) {
        String cut = text.length() <= 40 ? text : text.substring(0, 40) + "...";
        return "'" + cut + "'";
    }
}
