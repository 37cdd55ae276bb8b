package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.codec.Hex;
import io.strongroom.dataplane.codec.Utf8;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * Reads a field-mode record value as {@code json_fields.load_json_object} does: strict UTF-8, strict JSON,
 * an object, and (when the raw bytes hold a {@code \}{@code u} escape) no lone UTF-16 surrogate anywhere.
 */
public final class DocumentReader {
    private static final String ESCAPE = "\\u";
    private static final String PREFIX = "sr1:";

    private DocumentReader() {
    }

    @SuppressWarnings("unchecked")
    public static Map<String, Object> load(byte[] raw) {
        String text = Utf8.decodeOrNull(raw);
        if (text == null) {
            throw notJson("value is not UTF-8 (bad byte at offset " + Utf8.firstBadByte(raw) + ")");
        }
        Object document;
        try {
            document = StrictJson.parse(text);
        } catch (InvalidJson e) {
            throw notJson(duplicateName(e.getMessage()) != null
                    ? "value names the member " + Hex.show(duplicateName(e.getMessage()))
                            + " twice in one object (readers disagree on which one counts)"
                    : "value is not JSON: " + e.getMessage());
        }
        if (!(document instanceof Map<?, ?>)) {
            throw new EnvelopeException(ErrorKind.NOT_JSON_OBJECT, "value is a JSON " + typeName(document) + ", not an object");
        }
        if (text.indexOf(ESCAPE) >= 0) { // the same as the raw bytes holding it: strict UTF-8 keeps ASCII as is
            utf8(write(document));
        }
        return (Map<String, Object>) document;
    }

    /** The member name of Jackson's {@code Duplicate field 'name'} message, or null for any other message. */
    private static String duplicateName(String message) {
        String head = "Duplicate field '";
        if (message.startsWith(head) && message.endsWith("'") && message.length() > head.length()) {
            return message.substring(head.length(), message.length() - 1);
        }
        return null;
    }

    /** False only when no string of the document can start with {@code sr1:} (no prefix, no escape). */
    public static boolean mayHoldEnvelopes(byte[] raw) {
        String bytes = latin1(raw);
        return bytes.indexOf(PREFIX) >= 0 || bytes.indexOf(ESCAPE) >= 0;
    }

    /** {@code _dumps}: the compact Python text of a value, {@link ErrorKind#NOT_JSON} for 1e400. */
    static String write(Object value) {
        try {
            return PyJson.write(value);
        } catch (InvalidJson e) {
            throw notJson("value contains " + e.getMessage());
        }
    }

    /** {@code _utf8}: the UTF-8 bytes of text, {@link ErrorKind#NOT_JSON} for a lone surrogate. */
    static byte[] utf8(String text) {
        if (Utf8.hasLoneSurrogate(text)) {
            throw notJson("value holds a lone UTF-16 surrogate escape (like \\ud800), which has no UTF-8 form");
        }
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String typeName(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Map<?, ?>) {
            return "object";
        }
        if (value instanceof List<?>) {
            return "array";
        }
        if (value instanceof String) {
            return "string";
        }
        return value instanceof Boolean ? "boolean" : "number";
    }

    /** Whether the ASCII text {@code needle} occurs in {@code haystack}, byte for byte. */
    static boolean contains(byte[] haystack, String needle) {
        return latin1(haystack).indexOf(needle) >= 0;
    }

    /**
     * The bytes as a string of one char per byte (ISO-8859-1 maps every byte to the char of the same value),
     * so that a byte search is the JDK's vectorised {@link String#indexOf(String)}: a plain loop over a 1 KB
     * value cost several microseconds per search, more than sealing the value.
     */
    private static String latin1(byte[] bytes) {
        return new String(bytes, StandardCharsets.ISO_8859_1);
    }

    private static EnvelopeException notJson(String problem) {
        return new EnvelopeException(ErrorKind.NOT_JSON, problem);
    }
}
