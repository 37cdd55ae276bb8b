package io.strongroom.dataplane.codec;

/** The {@code strongroom.enc} record header: {@code format version ‖ value mode}, exactly 2 bytes. */
public final class RecordMarker {
    private RecordMarker() {
    }

    /** The header value to put on a record encrypted in {@code mode}. */
    public static byte[] headerValue(ValueMode mode) {
        return new byte[] {WireIds.FORMAT_V1, mode.id()};
    }

    /** Decode a header value, with the precise error for each bad byte (as the Python reader). */
    public static ValueMode parse(byte[] value) {
        String name = "'" + WireIds.RECORD_HEADER_NAME + "'";
        if (value == null || value.length != 2) {
            String size = value == null ? "null" : value.length + " bytes";
            throw new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE,
                    "header " + name + " must be exactly 2 bytes (version, mode), got " + size);
        }
        if (value[0] != WireIds.FORMAT_V1) {
            throw new EnvelopeException(ErrorKind.UNSUPPORTED_FORMAT_VERSION,
                    "header " + name + " has format version " + Hex.byteId(value[0]) + "; this strongroom reads 0x01");
        }
        ValueMode mode = ValueMode.fromId(value[1]);
        if (mode == null) {
            throw new EnvelopeException(ErrorKind.UNKNOWN_VALUE_MODE,
                    "header " + name + " has unknown value mode " + Hex.byteId(value[1]));
        }
        return mode;
    }
}
