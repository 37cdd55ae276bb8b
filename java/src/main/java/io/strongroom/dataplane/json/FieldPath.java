package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A field path of JSON field mode ({@code $.a.b}, {@code $.items[*].email}, {@code $["odd key"]}) and its
 * canonical text, the text the AAD binds (as {@code strongroom.envelope.jsonpath}). A segment is a member
 * name or {@code null} for {@code [*]}.
 */
public final class FieldPath {
    private final List<String> segments;
    private final String text;

    public FieldPath(List<String> segments) {
        if (segments.isEmpty() || segments.get(0) == null) {
            throw invalid("field path '" + render(segments) + "' must start with a member name (the value is a JSON object)");
        }
        this.segments = Collections.unmodifiableList(new ArrayList<>(segments));
        this.text = render(segments);
    }

    public List<String> segments() {
        return segments;
    }

    /** The canonical text. */
    public String text() {
        return text;
    }

    public boolean isPrefixOf(FieldPath other) {
        return other.segments.size() >= segments.size() && other.segments.subList(0, segments.size()).equals(segments);
    }

    /** Parse a rule path; {@link ErrorKind#INVALID_FIELD_PATH} names the offending position. */
    public static FieldPath parse(String text) {
        if (!text.startsWith("$")) {
            throw invalid("field path '" + text + "' must start with '$'");
        }
        List<String> segments = new ArrayList<>();
        int pos = 1;
        while (pos < text.length()) {
            pos = parseSegment(text, pos, segments);
        }
        if (segments.isEmpty()) {
            throw invalid("field path '" + text + "' names the whole value; use whole-value mode instead");
        }
        return new FieldPath(segments);
    }

    /** The canonical text of a path given by its segments (what the AAD binds). */
    public static String render(List<String> segments) {
        StringBuilder out = new StringBuilder("$");
        for (String segment : segments) {
            if (segment == null) {
                out.append("[*]");
            } else if (PlainName.isPlain(segment)) {
                out.append('.').append(segment);
            } else {
                out.append('[');
                PyJson.appendString(out, segment);
                out.append(']');
            }
        }
        return out.toString();
    }

    private static int parseSegment(String text, int pos, List<String> out) {
        char c = text.charAt(pos);
        if (c == '.') {
            int end = PlainName.end(text, pos + 1);
            if (end == pos + 1) {
                throw invalid("field path '" + text + "': expected a member name at offset " + (pos + 1)
                        + " (use [\"...\"] for names with special characters)");
            }
            out.add(text.substring(pos + 1, end));
            return end;
        }
        if (c == '[') {
            if (text.startsWith("[*]", pos)) {
                out.add(null);
                return pos + 3;
            }
            if (text.startsWith("[\"", pos)) {
                QuotedName name = QuotedName.read(text, pos + 1);
                if (!text.startsWith("]", name.end())) {
                    throw invalid("field path '" + text + "': expected ']' at offset " + name.end());
                }
                out.add(name.value());
                return name.end() + 1;
            }
            throw invalid("field path '" + text + "': at offset " + pos + " only [*] and [\"name\"] are allowed "
                    + "(array indices are not supported: use [*])");
        }
        throw invalid("field path '" + text + "': unexpected '" + c + "' at offset " + pos);
    }

    static EnvelopeException invalid(String problem) {
        return new EnvelopeException(ErrorKind.INVALID_FIELD_PATH, problem);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof FieldPath path && path.segments.equals(segments);
    }

    @Override
    public int hashCode() {
        return segments.hashCode();
    }

    @Override
    public String toString() {
        return "FieldPath('" + text + "')";
    }
}
