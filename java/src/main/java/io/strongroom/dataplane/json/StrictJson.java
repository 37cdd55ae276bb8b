package io.strongroom.dataplane.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import java.io.IOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads JSON text exactly as strict as the Python codec's decoder ({@code json_fields._DECODER}): RFC 8259
 * only (no NaN/Infinity, comments, trailing commas, single quotes, leading zeros or BOM), a member name
 * twice in one object refused (Jackson's {@code STRICT_DUPLICATE_DETECTION}), nothing after the value.
 *
 * <p>Values become {@link LinkedHashMap} (member order kept), {@link ArrayList}, {@link String},
 * {@link Long} / {@link BigInteger} for integers, {@link Double} for numbers with a fraction or exponent
 * (1e400 becomes infinity, refused when written back, as in Python), {@link Boolean} and {@code null}.
 * Limits mirror CPython: integers of more than 4300 digits are refused, nesting deeper than
 * {@value #MAX_DEPTH} levels is refused (CPython's recursion limit stops near the same depth), strings,
 * names and documents are otherwise unbounded.
 */
public final class StrictJson {
    public static final int MAX_DEPTH = 990;
    static final int MAX_INT_DIGITS = 4300;

    private static final JsonFactory FACTORY = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
            .streamReadConstraints(StreamReadConstraints.builder()
                    .maxNestingDepth(MAX_DEPTH)
                    .maxNumberLength(Integer.MAX_VALUE)
                    .maxStringLength(Integer.MAX_VALUE)
                    .maxNameLength(Integer.MAX_VALUE)
                    .build())
            .build();

    private StrictJson() {
    }

    /** Parse {@code text} (already decoded from UTF-8) into plain Java values. */
    public static Object parse(String text) throws InvalidJson {
        if (!text.isEmpty() && text.charAt(0) == '\uFEFF') {
            throw new InvalidJson("it starts with a byte order mark");
        }
        try (JsonParser parser = FACTORY.createParser(text)) {
            JsonToken first = parser.nextToken();
            if (first == null) {
                throw new InvalidJson("Expecting value at the end of the input");
            }
            Object value = read(parser, first);
            if (parser.nextToken() != null) {
                throw new InvalidJson("Extra data after the JSON value");
            }
            return value;
        } catch (StreamConstraintsException e) {
            throw new InvalidJson("it nests too deeply");
        } catch (JsonProcessingException e) {
            throw new InvalidJson(describe(e));
        } catch (IOException e) {
            throw new InvalidJson("unreadable: " + e.getClass().getSimpleName());
        }
    }

    private static Object read(JsonParser parser, JsonToken token) throws IOException, InvalidJson {
        switch (token) {
            case START_OBJECT:
                return readObject(parser);
            case START_ARRAY:
                return readArray(parser);
            case VALUE_STRING:
                return parser.getText();
            case VALUE_NUMBER_INT:
                return readInteger(parser);
            case VALUE_NUMBER_FLOAT:
                return parser.getDoubleValue();
            case VALUE_TRUE:
                return Boolean.TRUE;
            case VALUE_FALSE:
                return Boolean.FALSE;
            case VALUE_NULL:
                return null;
            default:
                throw new InvalidJson("unexpected token " + token);
        }
    }

    private static Map<String, Object> readObject(JsonParser parser) throws IOException, InvalidJson {
        Map<String, Object> object = new LinkedHashMap<>();
        for (JsonToken token = parser.nextToken(); token != JsonToken.END_OBJECT; token = parser.nextToken()) {
            String name = parser.currentName();
            object.put(name, read(parser, parser.nextToken()));
        }
        return object;
    }

    private static List<Object> readArray(JsonParser parser) throws IOException, InvalidJson {
        List<Object> array = new ArrayList<>();
        for (JsonToken token = parser.nextToken(); token != JsonToken.END_ARRAY; token = parser.nextToken()) {
            array.add(read(parser, token));
        }
        return array;
    }

    private static Object readInteger(JsonParser parser) throws IOException, InvalidJson {
        String digits = parser.getText();
        int count = digits.startsWith("-") ? digits.length() - 1 : digits.length();
        if (count > MAX_INT_DIGITS) {
            throw new InvalidJson("Exceeds the limit (" + MAX_INT_DIGITS + " digits) for integer string conversion");
        }
        return parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER
                ? parser.getBigIntegerValue() : (Object) parser.getLongValue();
    }

    /** Jackson's message up to its source excerpt: the problem and where, never the document. */
    private static String describe(JsonProcessingException e) {
        String message = e.getOriginalMessage();
        if (message.startsWith("Duplicate field ")) {
            return message;
        }
        int cut = message.indexOf('\n');
        String head = cut < 0 ? message : message.substring(0, cut);
        head = head.length() > 200 ? head.substring(0, 200) + "..." : head;
        return e.getLocation() == null ? head
                : head + " at line " + e.getLocation().getLineNr() + " column " + e.getLocation().getColumnNr();
    }
}
