package io.strongroom.dataplane.codec;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Strict UTF-8 in both directions, as Python's {@code bytes.decode("utf-8")} / {@code str.encode("utf-8")}:
 * malformed bytes, overlong forms and encoded surrogates are refused on decode, lone surrogates on encode
 * (the JDK's own encoder would silently write {@code ?} for them).
 */
public final class Utf8 {
    private Utf8() {
    }

    /** The text of {@code bytes}, or null when they are not UTF-8. */
    public static String decodeOrNull(byte[] bytes) {
        CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        try {
            return decoder.decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    /** True when {@code bytes[offset, offset + length)} is UTF-8 (as {@link #decodeOrNull} decides). */
    public static boolean isValid(byte[] bytes, int offset, int length) {
        CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        try {
            decoder.decode(ByteBuffer.wrap(bytes, offset, length));
            return true;
        } catch (CharacterCodingException e) {
            return false;
        }
    }

    /** Where the first byte that is not UTF-8 is (Python's {@code UnicodeDecodeError.start}); -1 if none. */
    public static int firstBadByte(byte[] bytes) {
        CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(bytes);
        java.nio.CharBuffer out = java.nio.CharBuffer.allocate(Math.max(16, bytes.length));
        java.nio.charset.CoderResult result = decoder.decode(in, out, true);
        return result.isError() ? in.position() : -1;
    }

    /** True when {@code text} holds a UTF-16 surrogate that is not part of a pair (no UTF-8 form). */
    public static boolean hasLoneSurrogate(String text) {
        int length = text.length();
        for (int i = 0; i < length; i++) {
            char c = text.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < length && Character.isLowSurrogate(text.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return true;
            }
        }
        return false;
    }
}
