package io.strongroom.dataplane.schema;

import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.codec.Utf8;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import org.apache.avro.AvroRuntimeException;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.Decoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * One Avro schema (Apache Avro, on Spark's classpath): reads a payload into generic data, finds the targets'
 * present values in it and writes it back ({@code avro_format.py} and {@code fields.py} with fastavro). Logical
 * types are read as their underlying types, so every field the rule does not seal is written back byte for byte.
 * A boolean is the byte 0 or 1 ({@link StrictBooleans}): Apache Avro reads any other byte as false and fastavro as
 * true, so it is a mismatch on both engines. A payload must be consumed exactly: trailing bytes are a mismatch, as
 * in Python.
 */
final class AvroFormat implements RecordFormat {
    private static final TargetWalk.Navigator NAVIGATOR = TargetWalk.listsAndMaps(AvroFormat::fieldSlot);
    private final Schema schema;
    private final String where;
    private final GenericDatumReader<Object> reader;
    private final GenericDatumWriter<Object> writer;

    AvroFormat(String text, String where) {
        this.where = where;
        try {
            this.schema = new Schema.Parser().setValidateDefaults(false).parse(text);
        } catch (RuntimeException e) {
            throw new EnvelopeException(ErrorKind.UNSUPPORTED_SCHEMA,
                    where + " is not an Avro schema Apache Avro can read: " + e.getClass().getSimpleName());
        }
        this.reader = new StrictReader(schema);
        this.writer = new GenericDatumWriter<>(schema);
    }

    /**
     * Reads maps in the payload's order, so a map is written back entry for entry as it came, and every string as
     * its raw UTF-8 bytes ({@code Utf8}, even under {@code "avro.java.string": "String"}), refusing bytes that are
     * not UTF-8 as fastavro does: a lenient decode would seal or write back a changed text.
     */
    private static final class StrictReader extends GenericDatumReader<Object> {
        StrictReader(Schema schema) {
            super(schema);
        }

        @Override
        protected Object newMap(Object old, int size) {
            return new LinkedHashMap<>(Math.max(16, Math.min(size, 1 << 16)));
        }

        @Override
        protected Object readString(Object old, Schema expected, Decoder in) throws IOException {
            return readString(old, in);
        }

        @Override
        protected Object readString(Object old, Decoder in) throws IOException {
            Object value = super.readString(old, in);
            if (value instanceof org.apache.avro.util.Utf8 text
                    && !Utf8.isValid(text.getBytes(), 0, text.getByteLength())) {
                throw new AvroRuntimeException("a string is not UTF-8");
            }
            return value;
        }
    }

    /**
     * Apache Avro's binary decoder, but a boolean is the byte 0 or 1 and any other byte is refused (Avro's own
     * decoder reads it as false), as {@code avro_format.py}'s codec form refuses it.
     */
    private static final class StrictBooleans extends Decoder {
        private final BinaryDecoder in;
        private final byte[] one = new byte[1];

        StrictBooleans(BinaryDecoder in) {
            this.in = in;
        }

        @Override
        public boolean readBoolean() throws IOException {
            in.readFixed(one, 0, 1);
            if ((one[0] & 0xFE) != 0) {
                throw new AvroRuntimeException("a boolean is the byte 0 or 1");
            }
            return one[0] == 1;
        }

        @Override
        public void readNull() throws IOException {
            in.readNull();
        }

        @Override
        public int readInt() throws IOException {
            return in.readInt();
        }

        @Override
        public long readLong() throws IOException {
            return in.readLong();
        }

        @Override
        public float readFloat() throws IOException {
            return in.readFloat();
        }

        @Override
        public double readDouble() throws IOException {
            return in.readDouble();
        }

        @Override
        public org.apache.avro.util.Utf8 readString(org.apache.avro.util.Utf8 old) throws IOException {
            return in.readString(old);
        }

        @Override
        public String readString() throws IOException {
            return in.readString();
        }

        @Override
        public void skipString() throws IOException {
            in.skipString();
        }

        @Override
        public java.nio.ByteBuffer readBytes(java.nio.ByteBuffer old) throws IOException {
            return in.readBytes(old);
        }

        @Override
        public void skipBytes() throws IOException {
            in.skipBytes();
        }

        @Override
        public void readFixed(byte[] bytes, int start, int length) throws IOException {
            in.readFixed(bytes, start, length);
        }

        @Override
        public void skipFixed(int length) throws IOException {
            in.skipFixed(length);
        }

        @Override
        public int readEnum() throws IOException {
            return in.readEnum();
        }

        @Override
        public long readArrayStart() throws IOException {
            return in.readArrayStart();
        }

        @Override
        public long arrayNext() throws IOException {
            return in.arrayNext();
        }

        @Override
        public long skipArray() throws IOException {
            return in.skipArray();
        }

        @Override
        public long readMapStart() throws IOException {
            return in.readMapStart();
        }

        @Override
        public long mapNext() throws IOException {
            return in.mapNext();
        }

        @Override
        public long skipMap() throws IOException {
            return in.skipMap();
        }

        @Override
        public int readIndex() throws IOException {
            return in.readIndex();
        }
    }

    /** The datum in {@code value[offset..]}; {@link ErrorKind#PAYLOAD_MISMATCH} when it does not read exactly. */
    @Override
    public Object decode(byte[] value, int offset) {
        BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(value, offset, value.length - offset, null);
        Object datum;
        try {
            datum = reader.read(null, new StrictBooleans(decoder));
            if (!decoder.isEnd()) {
                throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH,
                        "payload does not read as " + where + ": bytes left over");
            }
        } catch (IOException | RuntimeException | OutOfMemoryError e) {
            if (e instanceof EnvelopeException known) {
                throw known;
            }
            throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH,
                    "payload does not read as " + where + ": " + e.getClass().getSimpleName());
        }
        return datum;
    }

    /** A datum Apache Avro read is valid for its schema by construction. */
    @Override
    public void validate(Object datum) {
    }

    /** {@code header} followed by the datum written with the schema. */
    @Override
    public byte[] encode(byte[] header, Object datum) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(256);
        out.writeBytes(header);
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
        try {
            writer.write(datum, encoder);
            encoder.flush();
        } catch (IOException | RuntimeException e) {
            throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH,
                    "record cannot be written back as " + where + ": " + e.getClass().getSimpleName());
        }
        return out.toByteArray();
    }

    /** Every present value of {@code targets} in {@code root}. */
    @Override
    public List<Slot> slots(Object root, List<FieldTarget> targets) {
        return TargetWalk.slots(root, targets, NAVIGATOR);
    }

    /** The field of the record a field step walks into (null: another type, another union branch, absent). */
    private static Slot fieldSlot(Object node, FieldTarget.Step step, FieldTarget target) {
        if (!(node instanceof GenericRecord record) || record.getSchema().getField(step.name()) == null) {
            return null;
        }
        if (step.record() != null && !step.record().equals(record.getSchema().getFullName())) {
            return null;
        }
        return new FieldSlot(record, record.getSchema().getField(step.name()).pos(), target);
    }

    private record FieldSlot(GenericRecord record, int pos, FieldTarget target) implements Slot {
        public Object get() {
            return record.get(pos);
        }

        public void set(Object value) {
            record.put(pos, value);
        }
    }

    /**
     * The text of the scalar at the dotted {@code path} ({@code $.a.b}) of the record: a string, or an int or long
     * as its decimal text; null when absent or of another type ({@code SchemaFields.subject} in Python).
     */
    @Override
    public String subject(Object root, String path) {
        return subjectText(root, path);
    }

    /** Apache Avro's class name of the value (the reasons name it; fastavro's differ only for such a bug). */
    @Override
    public String typeName(Object value) {
        return value.getClass().getSimpleName();
    }

    private static boolean hasLogicalType(Schema type, Object value) {
        if (type.getType() == Schema.Type.UNION) {
            Integer branch = GenericData.get().resolveUnion(type, value);
            type = type.getTypes().get(branch);
        }
        return type.getLogicalType() != null || type.getProp("logicalType") != null;
    }

    private static String subjectText(Object root, String path) {
        Object node = root;
        Schema type = null;
        for (String name : path.substring(2).split("\\.", -1)) {
            if (!(node instanceof GenericRecord record) || record.getSchema().getField(name) == null) {
                return null;
            }
            type = record.getSchema().getField(name).schema();
            node = record.get(name);
        }
        if (node == null || hasLogicalType(type, node)) {
            return null; // fastavro reads these as UUIDs, dates, decimals: not a subject in Python either
        }
        if (node instanceof CharSequence || node instanceof GenericData.EnumSymbol) {
            return node.toString();
        }
        if (node instanceof Integer || node instanceof Long) {
            return node.toString();
        }
        return null;
    }
}
