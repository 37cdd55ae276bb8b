package io.strongroom.dataplane.json;

/**
 * A JSON string inside a field path ({@code ["any name"]}), read as Python's {@code raw_decode} reads it:
 * the escapes of RFC 8259, no raw control characters.
 */
record QuotedName(String value, int end) {
    /** Read the JSON string whose opening quote is at {@code start}; {@code end} is just past its closing quote. */
    static QuotedName read(String text, int start) {
        StringBuilder value = new StringBuilder();
        int pos = start + 1;
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c == '"') {
                return new QuotedName(value.toString(), pos + 1);
            }
            if (c < 0x20) {
                break;
            }
            if (c != '\\') {
                value.append(c);
                pos++;
                continue;
            }
            int consumed = escape(text, pos, value);
            if (consumed == 0) {
                break;
            }
            pos += consumed;
        }
        throw FieldPath.invalid("field path '" + text + "': bad quoted name at offset " + start);
    }

    /** Append the escape at {@code pos} (a backslash); how many characters it took, 0 when it is invalid. */
    private static int escape(String text, int pos, StringBuilder value) {
        if (pos + 1 >= text.length()) {
            return 0;
        }
        char kind = text.charAt(pos + 1);
        String simple = "\"\\/bfnrt";
        String meaning = "\"\\/\b\f\n\r\t";
        int index = simple.indexOf(kind);
        if (index >= 0) {
            value.append(meaning.charAt(index));
            return 2;
        }
        if (kind != 'u' || pos + 6 > text.length()) {
            return 0;
        }
        String hex = text.substring(pos + 2, pos + 6);
        if (!hex.chars().allMatch(h -> Character.digit(h, 16) >= 0)) {
            return 0;
        }
        value.append((char) Integer.parseInt(hex, 16));
        return 6;
    }
}
