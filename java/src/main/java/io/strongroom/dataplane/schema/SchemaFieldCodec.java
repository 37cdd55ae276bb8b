package io.strongroom.dataplane.schema;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.strongroom.dataplane.codec.EnvelopeCodec;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.EnvelopeParser;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.codec.KeyLookup;
import io.strongroom.dataplane.codec.KeyRef;
import io.strongroom.dataplane.codec.ParsedEnvelope;
import io.strongroom.dataplane.codec.RecordContext;
import io.strongroom.dataplane.codec.Utf8;
import io.strongroom.dataplane.codec.WireIds;
import io.strongroom.dataplane.json.SealedText;
import io.strongroom.dataplane.keys.KeyServiceClient;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Seals and opens the selected fields of schema-registry records in place, as {@code SchemaFields} in
 * {@code strongroom/schemas/sealing.py}: the same targets (the driver selects them from the schema and sends
 * them with the schema, op {@code schema_plan}), the same AAD (topic, subject, canonical field path), the same
 * errors. A string field holds {@code "sr1:" + base64(envelope)} of its UTF-8 bytes, a bytes field the raw
 * envelope; the record keeps its magic byte and schema id. Both directions are all or nothing.
 */
public final class SchemaFieldCodec {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int HEADER_SIZE = 5;
    private static final int MAX_PLANS = 4096;
    private static final byte ENVELOPE_FIRST_BYTE = (byte) 0xF5;

    private final EnvelopeCodec codec;
    private final PlanSource source;
    /** Per source topic and schema id (a schema id never changes its schema; the rule is the topic's). */
    private final Map<String, SchemaPlan> plans = new HashMap<>();

    public SchemaFieldCodec(EnvelopeCodec codec, PlanSource source) {
        this.codec = codec;
        this.source = source;
    }

    /** A codec whose plans come from the driver's key service ({@code schema_plan}, once per topic and id). */
    public static SchemaFieldCodec overKeyService(EnvelopeCodec codec, KeyServiceClient service) {
        return new SchemaFieldCodec(codec, (topic, schemaId) -> service.call("schema_plan",
                JSON.createObjectNode().put("topic", topic).put("schema_id", Integer.toUnsignedLong(schemaId))));
    }

    /** A record read with its plan: the datum and the present values of the targets. */
    private record Decoded(byte[] header, RecordFormat format, Object datum, List<RecordFormat.Slot> slots) {
    }

    /** The record in {@code value}, validated against its schema when it is about to be sealed. */
    private Decoded read(String topic, byte[] value, boolean validate) {
        int schemaId = schemaId(value);
        SchemaPlan plan = plan(topic, schemaId);
        RecordFormat format = plan.format();
        Object datum = format.decode(value, HEADER_SIZE);
        if (validate) {
            format.validate(datum);
        }
        return new Decoded(Arrays.copyOf(value, HEADER_SIZE), format, datum, format.slots(datum, plan.targets()));
    }

    /** The schema id of a value in the Confluent wire format ({@code unframe}). */
    static int schemaId(byte[] value) {
        if (value.length < HEADER_SIZE) {
            throw new EnvelopeException(ErrorKind.NOT_FRAMED, "value of " + value.length
                    + " bytes is too short for the Confluent wire format (5-byte header)");
        }
        if (value[0] != 0) {
            throw new EnvelopeException(ErrorKind.NOT_FRAMED, String.format("value starts with byte 0x%02x, not the "
                    + "Confluent magic byte 0x00", value[0] & 0xFF));
        }
        return ByteBuffer.wrap(value, 1, 4).getInt();
    }

    private SchemaPlan plan(String topic, int schemaId) {
        String key = topic + "\u0000" + schemaId;
        SchemaPlan plan = plans.get(key);
        if (plan == null) {
            plan = SchemaPlan.of(schemaId, source.plan(topic, schemaId));
            if (plans.size() >= MAX_PLANS) {
                plans.clear();
            }
            plans.put(key, plan);
        }
        return plan;
    }

    /**
     * How many fields {@link #seal} seals in {@code value} at most (present targets, sealed or not): what the record
     * charges its key's usage limit ({@code SchemaFields.value_count} in {@code schemas/sealing.py}). Targets
     * outside arrays and maps are counted from the schema alone.
     */
    public int valueCount(String topic, byte[] value) {
        SchemaPlan plan = plan(topic, schemaId(value));
        int fixed = plan.fixedValueCount();
        RecordFormat format = plan.format();
        return fixed >= 0 ? fixed : format.slots(format.decode(value, HEADER_SIZE), plan.targets()).size();
    }

    /** {@code value} with every present selected field sealed; the same array when the record has none. */
    public byte[] seal(String topic, byte[] value, byte[] dek, KeyRef keyRef, RecordContext ctx) {
        Decoded decoded = read(topic, value, true);
        boolean changed = false;
        for (RecordFormat.Slot slot : decoded.slots()) {
            Object current = slot.get();
            if (current == null) {
                continue;
            }
            String path = slot.target().path();
            if (current instanceof CharSequence chars) {
                byte[] plaintext = utf8(chars, path);
                String text = new String(plaintext, StandardCharsets.UTF_8);
                if (text.startsWith(WireIds.FIELD_PREFIX)) {
                    verifyPresealed(text, dek, ctx, path);
                    continue;
                }
                byte[] envelope = codec.seal(plaintext, dek, keyRef, ctx, path);
                slot.set(WireIds.FIELD_PREFIX + Base64.getEncoder().encodeToString(envelope));
            } else if (current instanceof ByteBuffer buffer) {
                slot.set(ByteBuffer.wrap(codec.seal(bytesOf(buffer), dek, keyRef, ctx, path)));
            } else {
                throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH, "field " + path + " holds a "
                        + decoded.format().typeName(current) + ", not a string or bytes");
            }
            changed = true;
        }
        return changed ? decoded.format().encode(decoded.header(), decoded.datum()) : value;
    }

    private void verifyPresealed(String text, byte[] dek, RecordContext ctx, String path) {
        try {
            codec.open(EnvelopeParser.parse(SealedText.decode(text)), dek, ctx, path, Map.of());
        } catch (EnvelopeException e) {
            throw new EnvelopeException(ErrorKind.UNVERIFIED_ENVELOPE, "field " + path + " already holds an 'sr1:' "
                    + "string that does not open under this subject's key for this topic and field ("
                    + e.kind().pythonName() + ")");
        }
    }

    /**
     * {@code value} with every selected field opened: a field of an erased key ({@code keys} answers null) reads
     * as null where its type allows, else as the empty string or bytes.
     */
    public byte[] open(String topic, byte[] value, KeyLookup keys, RecordContext ctx) {
        Decoded decoded = read(topic, value, false);
        Map<ByteBuffer, byte[]> deks = new HashMap<>(); // by envelope header: one lookup per key per record
        List<Object> replacements = new ArrayList<>();
        List<RecordFormat.Slot> opened = new ArrayList<>();
        for (RecordFormat.Slot slot : decoded.slots()) {
            Object current = slot.get();
            if (current == null) {
                continue;
            }
            FieldTarget target = slot.target();
            ParsedEnvelope parsed = EnvelopeParser.parse(envelopeOf(current, target, decoded.format()));
            ByteBuffer header = ByteBuffer.wrap(parsed.header());
            if (!deks.containsKey(header)) {
                deks.put(header, keys.dekFor(parsed.keyRef()));
            }
            byte[] dek = deks.get(header);
            opened.add(slot);
            replacements.add(dek == null ? erasedValue(target) : typed(codec.open(parsed, dek, ctx, target.path(),
                    Map.of()), target));
        }
        if (opened.isEmpty()) {
            return value;
        }
        for (int i = 0; i < opened.size(); i++) {
            opened.get(i).set(replacements.get(i));
        }
        return decoded.format().encode(decoded.header(), decoded.datum());
    }

    /**
     * Every key a record's sealed fields name, without opening them ({@code key_refs(sealed_only=True)} in Python):
     * a selected field holding plaintext is passed over here and fails when the record is opened.
     */
    public List<KeyRef> keyRefs(String topic, byte[] value) {
        List<KeyRef> refs = new ArrayList<>();
        Decoded decoded = read(topic, value, false);
        for (RecordFormat.Slot slot : decoded.slots()) {
            Object current = slot.get();
            if (looksSealed(current)) {
                refs.add(EnvelopeParser.parse(envelopeOf(current, slot.target(), decoded.format())).keyRef());
            }
        }
        return refs;
    }

    /** True when a selected field holds something sealed-looking (a record without the marker header). */
    public boolean holdsEnvelopes(String topic, byte[] value) {
        for (RecordFormat.Slot slot : read(topic, value, false).slots()) {
            if (looksSealed(slot.get())) {
                return true;
            }
        }
        return false;
    }

    /** An {@code sr1:} string, or bytes starting with the envelope magic ({@code _looks_sealed}). */
    private static boolean looksSealed(Object current) {
        if (current instanceof CharSequence text) {
            return text.toString().startsWith(WireIds.FIELD_PREFIX);
        }
        return current instanceof ByteBuffer buffer && buffer.remaining() > 0
                && buffer.get(buffer.position()) == ENVELOPE_FIRST_BYTE;
    }

    /** The text of the scalar at the dotted {@code path} of the record (null when absent or not a scalar). */
    public String subject(String topic, byte[] value, String path) {
        Decoded decoded = read(topic, value, false);
        return decoded.format().subject(decoded.datum(), path);
    }

    private static byte[] envelopeOf(Object current, FieldTarget target, RecordFormat format) {
        String path = target.path();
        if (current instanceof CharSequence chars) {
            String text = chars.toString();
            if (!text.startsWith(WireIds.FIELD_PREFIX)) {
                throw new EnvelopeException(ErrorKind.UNENCRYPTED_FIELD,
                        "field " + path + " should be encrypted but holds plaintext (a string)");
            }
            try {
                return SealedText.decode(text);
            } catch (EnvelopeException e) {
                throw new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE,
                        "field " + path + ": not valid base64 after 'sr1:'");
            }
        }
        if (current instanceof ByteBuffer buffer) {
            byte[] bytes = bytesOf(buffer);
            if (bytes.length == 0 || bytes[0] != ENVELOPE_FIRST_BYTE) {
                throw new EnvelopeException(ErrorKind.UNENCRYPTED_FIELD,
                        "field " + path + " should be encrypted but holds plaintext (bytes)");
            }
            return bytes;
        }
        throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH, "field " + path + " holds a "
                + format.typeName(current) + ", not a string or bytes");
    }

    private static Object typed(byte[] plain, FieldTarget target) {
        if (target.bytes()) {
            return ByteBuffer.wrap(plain);
        }
        String text = Utf8.decodeOrNull(plain);
        if (text == null) {
            throw new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE, "field " + target.path()
                    + " decrypted to bytes that are not UTF-8; the producer is broken");
        }
        return text;
    }

    private static Object erasedValue(FieldTarget target) {
        if (target.nullable()) {
            return null;
        }
        return target.bytes() ? ByteBuffer.allocate(0) : "";
    }

    /**
     * The UTF-8 bytes of a string field as the payload holds them, refused when they are not valid UTF-8 (fastavro
     * refuses such a payload too; decoding it leniently would seal a changed text).
     */
    private static byte[] utf8(CharSequence chars, String path) {
        byte[] raw = chars instanceof org.apache.avro.util.Utf8 avro
                ? Arrays.copyOf(avro.getBytes(), avro.getByteLength()) : chars.toString().getBytes(StandardCharsets.UTF_8);
        if (Utf8.decodeOrNull(raw) == null) {
            throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH, "field " + path + " is not valid UTF-8 text");
        }
        return raw;
    }

    private static byte[] bytesOf(ByteBuffer buffer) {
        byte[] bytes = new byte[buffer.remaining()];
        buffer.duplicate().get(bytes);
        return bytes;
    }
}
