package io.strongroom.dataplane.json;

import java.math.BigInteger;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * Writes values read by {@link StrictJson} exactly as Python's
 * {@code json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False)}: the compact text the
 * field-mode plaintexts and re-serialised documents are made of (docs/wire-format.md, section 5).
 * Only {@code "}, {@code \} and control characters are escaped (as lower-case hex escapes); non-ASCII
 * characters are written as they are; floats as {@link PyFloat#repr}.
 */
public final class PyJson {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private PyJson() {
    }

    /** The compact JSON text of {@code value}; {@link InvalidJson} for a non-finite number. */
    public static String write(Object value) throws InvalidJson {
        StringBuilder out = new StringBuilder();
        append(out, value);
        return out.toString();
    }

    @SuppressWarnings("unchecked")
    private static void append(StringBuilder out, Object value) throws InvalidJson {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String text) {
            appendString(out, text);
        } else if (value instanceof Boolean flag) {
            out.append(flag ? "true" : "false");
        } else if (value instanceof Long || value instanceof BigInteger) {
            out.append(value);
        } else if (value instanceof Double number) {
            if (number.isNaN() || number.isInfinite()) {
                throw new InvalidJson("a number that does not fit a double (like 1e400)");
            }
            out.append(PyFloat.repr(number));
        } else if (value instanceof Map<?, ?> object) {
            appendObject(out, (Map<String, Object>) object);
        } else if (value instanceof List<?> array) {
            appendArray(out, array);
        } else {
            throw new IllegalArgumentException("not a JSON value: " + value.getClass().getName());
        }
    }

    private static void appendObject(StringBuilder out, Map<String, Object> object) throws InvalidJson {
        out.append('{');
        Iterator<Map.Entry<String, Object>> members = object.entrySet().iterator();
        while (members.hasNext()) {
            Map.Entry<String, Object> member = members.next();
            appendString(out, member.getKey());
            out.append(':');
            append(out, member.getValue());
            if (members.hasNext()) {
                out.append(',');
            }
        }
        out.append('}');
    }

    private static void appendArray(StringBuilder out, List<?> array) throws InvalidJson {
        out.append('[');
        for (int i = 0; i < array.size(); i++) {
            if (i > 0) {
                out.append(',');
            }
            append(out, array.get(i));
        }
        out.append(']');
    }

    /** A JSON string as Python's {@code encode_basestring} writes it (runs without escapes are copied whole). */
    public static void appendString(StringBuilder out, String text) {
        out.append('"');
        int run = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c >= 0x20 && c != '"' && c != '\\') {
                continue;
            }
            out.append(text, run, i);
            appendEscape(out, c);
            run = i + 1;
        }
        out.append(text, run, text.length()).append('"');
    }

    private static void appendEscape(StringBuilder out, char c) {
        switch (c) {
            case '"' -> out.append("\\\"");
            case '\\' -> out.append("\\\\");
            case '\n' -> out.append("\\n");
            case '\r' -> out.append("\\r");
            case '\t' -> out.append("\\t");
            case '\b' -> out.append("\\b");
            case '\f' -> out.append("\\f");
            default -> out.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 0xF]);
        }
    }
}
