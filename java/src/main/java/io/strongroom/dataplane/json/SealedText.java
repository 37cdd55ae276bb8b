package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.codec.WireIds;
import java.util.Base64;
import java.util.regex.Pattern;

/**
 * An {@code sr1:} string: its envelope bytes, read only from the one spelling strongroom writes (Python's
 * {@code envelope.sealed_text.sealed_envelope}: RFC 4648's standard alphabet, padded, unused bits zero), and the
 * check that the raw document spells it canonically (no JSON escapes: strongroom never writes any).
 */
public final class SealedText {
    private static final Pattern BASE64 = Pattern.compile("[A-Za-z0-9+/]*={0,2}");
    private static final int PREFIX_LENGTH = WireIds.FIELD_PREFIX.length();

    private SealedText() {
    }

    static boolean isSealed(Object value) {
        return value instanceof String text && text.startsWith(WireIds.FIELD_PREFIX);
    }

    /** {@code _decode_field}: another spelling of the same bytes (unused bits set) is refused as well. */
    public static byte[] decode(String text) {
        String data = text.substring(PREFIX_LENGTH);
        if (data.length() % 4 != 0 || !BASE64.matcher(data).matches()) {
            throw notBase64();
        }
        byte[] envelope = Base64.getDecoder().decode(data);
        if (!Base64.getEncoder().encodeToString(envelope).equals(data)) {
            throw notBase64();
        }
        return envelope;
    }

    private static EnvelopeException notBase64() {
        return new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE,
                "encrypted field string is not valid base64 after 'sr1:'");
    }

    /** {@code _check_spelling}. */
    static void checkSpelling(byte[] raw, String text, String path) {
        boolean ascii = text.chars().allMatch(c -> c < 0x80);
        if (ascii && DocumentReader.contains(raw, "\"" + text + "\"")) {
            return;
        }
        throw new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE, "field " + path
                + " spells its 'sr1:' string with JSON escapes; strongroom never writes that, "
                + "so it was crafted to slip past byte-level checks");
    }

    /** {@code _canonical}: the envelope of a sealed field, valid base64 and spelt canonically. */
    static byte[] canonical(byte[] raw, String text, String path) {
        byte[] envelope = decode(text);
        checkSpelling(raw, text, path);
        return envelope;
    }
}
