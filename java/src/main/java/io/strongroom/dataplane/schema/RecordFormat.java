package io.strongroom.dataplane.schema;

import java.util.List;

/**
 * How the records of one schema id are read, checked, walked and written back: Avro ({@link AvroFormat}) or JSON
 * Schema ({@link JsonSchemaFormat}), as {@code SchemaPlan.read} in {@code strongroom/schemas/sealing.py}.
 */
interface RecordFormat {
    /** The datum in {@code value[offset..]}; {@code PayloadMismatch} when it does not read as this schema. */
    Object decode(byte[] value, int offset);

    /** Refuses a datum that does not match the schema before anything of it is sealed (a no-op for Avro). */
    void validate(Object datum);

    /** {@code header} followed by the datum written with the schema. */
    byte[] encode(byte[] header, Object datum);

    /** Every present value of {@code targets} in {@code root}. */
    List<Slot> slots(Object root, List<FieldTarget> targets);

    /** The text of the scalar at the dotted {@code path} ({@code $.a.b}), null when absent or of another type. */
    String subject(Object root, String path);

    /** The name Python gives the type of a value that is neither a string nor bytes (for the same reasons). */
    String typeName(Object value);

    /** Where one present value of a target sits: a record field, a list index or a map key. */
    interface Slot {
        Object get();

        void set(Object value);

        FieldTarget target();
    }
}
