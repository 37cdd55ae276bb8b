package io.strongroom.dataplane.schema;

import java.util.List;

/**
 * A field a schema-aware rule seals, as the driver selected it ({@code FieldTarget} in
 * {@code strongroom/schemas/fields.py}): its canonical path (what the AAD binds), the steps from the record
 * to it, whether it holds bytes (else a string) and whether its type allows null.
 */
public record FieldTarget(String path, List<Step> steps, boolean bytes, boolean nullable) {

    /** What a step walks into: a record field, array items or map values. */
    public enum Kind {
        FIELD, ITEMS, VALUES
    }

    /**
     * One step from a value to its children; {@code record} (may be null) limits a field step to one record type
     * (a branch of a union of records), by its full name.
     */
    public record Step(Kind kind, String name, String record) {
    }
}
