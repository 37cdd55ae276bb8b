package io.strongroom.dataplane.json;

/**
 * The "plain" characters of a member name written as {@code .name}: anything except
 * {@code . [ ] " ' $ \}, control characters and what Python's {@code str.isspace()} calls whitespace
 * (the regex {@code [^.\[\]"'$\\\s\x00-\x1f\x7f]} of {@code jsonpath._PLAIN_NAME}; Python's {@code \s}
 * is Unicode-aware, so the non-ASCII spaces are listed here).
 */
final class PlainName {
    private static final String SPECIAL = ".[]\"'$\\";
    private static final String UNICODE_SPACES = "\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
            + "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";

    private PlainName() {
    }

    static boolean isPlainChar(char c) {
        return c > 0x20 && c != 0x7f && SPECIAL.indexOf(c) < 0 && UNICODE_SPACES.indexOf(c) < 0;
    }

    static boolean isPlain(String name) {
        return !name.isEmpty() && end(name, 0) == name.length();
    }

    /** Where the run of plain characters starting at {@code start} ends. */
    static int end(String text, int start) {
        int pos = start;
        while (pos < text.length() && isPlainChar(text.charAt(pos))) {
            pos++;
        }
        return pos;
    }
}
