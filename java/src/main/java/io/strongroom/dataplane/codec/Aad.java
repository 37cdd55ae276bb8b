package io.strongroom.dataplane.codec;

import java.nio.charset.StandardCharsets;

/**
 * Additional authenticated data: {@code "strongroom/v1" ‖ header ‖ u16 topic ‖ u32 subject ‖ u16 path},
 * byte for byte as {@code strongroom.envelope.aad.build_aad}. The topic is already profile-resolved
 * (empty for PORTABLE, the logical name for TOPIC).
 */
public final class Aad {
    private Aad() {
    }

    public static byte[] build(byte[] header, String boundTopic, byte[] subject, String fieldPath) {
        if (Utf8.hasLoneSurrogate(boundTopic) || Utf8.hasLoneSurrogate(fieldPath)) {
            // the JDK's encoder would write '?' for it: an AAD that silently differs from the one meant
            throw new EnvelopeException(ErrorKind.ENCODING_LIMIT_EXCEEDED,
                    "the topic or field path holds a lone UTF-16 surrogate, which has no UTF-8 form");
        }
        byte[] topic = boundTopic.getBytes(StandardCharsets.UTF_8);
        byte[] path = fieldPath.getBytes(StandardCharsets.UTF_8);
        if (topic.length > WireIds.MAX_U16 || path.length > WireIds.MAX_U16) {
            throw new EnvelopeException(ErrorKind.ENCODING_LIMIT_EXCEEDED, "topic (" + topic.length
                    + " bytes) or field path (" + path.length + " bytes) is longer than the AAD allows (65535 bytes)");
        }
        byte[] label = WireIds.aadLabel();
        byte[] aad = new byte[label.length + header.length + 2 + topic.length + 4 + subject.length + 2 + path.length];
        int at = put(aad, 0, label);
        at = put(aad, at, header);
        at = putU16(aad, at, topic.length);
        at = put(aad, at, topic);
        aad[at++] = (byte) (subject.length >>> 24);
        aad[at++] = (byte) (subject.length >>> 16);
        at = putU16(aad, at, subject.length);
        at = put(aad, at, subject);
        at = putU16(aad, at, path.length);
        put(aad, at, path);
        return aad;
    }

    /** The AAD a record sealed with {@code keyRef} in {@code ctx} carries (the reference for tests). */
    public static byte[] forContext(KeyRef keyRef, RecordContext ctx, String fieldPath) {
        String topic = ctx.profile() == AadProfile.PORTABLE ? "" : ctx.topic();
        return build(keyRef.header(ctx.profile()), topic, ctx.subject(), fieldPath);
    }

    private static int put(byte[] into, int at, byte[] bytes) {
        System.arraycopy(bytes, 0, into, at, bytes.length);
        return at + bytes.length;
    }

    private static int putU16(byte[] into, int at, int value) {
        into[at] = (byte) (value >>> 8);
        into[at + 1] = (byte) value;
        return at + 2;
    }
}
