package io.strongroom.dataplane.codec;

/** Second byte of the {@code strongroom.enc} record header: what part of the value is encrypted. */
public enum ValueMode {
    WHOLE_VALUE((byte) 0x01),
    JSON_FIELDS((byte) 0x02),
    /** Fields of a schema-registry record (Confluent wire format) sealed in place. */
    SCHEMA_FIELDS((byte) 0x03);

    private final byte id;

    ValueMode(byte id) {
        this.id = id;
    }

    public byte id() {
        return id;
    }

    /** The mode with wire id {@code id}, or null when the registry has none. */
    public static ValueMode fromId(byte id) {
        for (ValueMode mode : values()) {
            if (mode.id == id) {
                return mode;
            }
        }
        return null;
    }
}
