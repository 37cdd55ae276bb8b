package io.strongroom.dataplane.codec;

import java.io.ByteArrayOutputStream;
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
        ByteArrayOutputStream out = new ByteArrayOutputStream(
                label.length + header.length + topic.length + subject.length + path.length + 8);
        out.writeBytes(label);
        out.writeBytes(header);
        writeU16(out, topic.length);
        out.writeBytes(topic);
        out.write(subject.length >>> 24);
        out.write(subject.length >>> 16);
        writeU16(out, subject.length);
        out.writeBytes(subject);
        writeU16(out, path.length);
        out.writeBytes(path);
        return out.toByteArray();
    }

    /** The AAD a record sealed with {@code keyRef} in {@code ctx} carries (the reference for tests). */
    public static byte[] forContext(KeyRef keyRef, RecordContext ctx, String fieldPath) {
        String topic = ctx.profile() == AadProfile.PORTABLE ? "" : ctx.topic();
        return build(keyRef.header(ctx.profile()), topic, ctx.subject(), fieldPath);
    }

    private static void writeU16(ByteArrayOutputStream out, int value) {
        out.write(value >>> 8);
        out.write(value);
    }
}
