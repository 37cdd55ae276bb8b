package io.strongroom.dataplane.codec;

/**
 * Why a record could not be sealed or opened. Each name is the name of the Python codec's error class
 * ({@code strongroom.envelope.errors}, {@code strongroom.crypto.errors}), so both engines report the
 * same reason and the same counters; the hint is the Python class's default hint.
 */
public enum ErrorKind {
    NOT_AN_ENVELOPE("NotAnEnvelope",
            "the record carries the strongroom header but its value is not an envelope; "
                    + "quarantine it and check the producer"),
    MALFORMED_ENVELOPE("MalformedEnvelope",
            "the record was truncated or corrupted; quarantine it and check the producer"),
    UNSUPPORTED_FORMAT_VERSION("UnsupportedFormatVersion",
            "upgrade strongroom on the reading side; if it is current, the record is corrupt"),
    UNKNOWN_CIPHER("UnknownCipher",
            "upgrade strongroom on the reading side; if it is current, the record is corrupt"),
    UNKNOWN_KEY_REF_KIND("UnknownKeyRefKind",
            "upgrade strongroom on the reading side; if it is current, the record is corrupt"),
    UNKNOWN_AAD_PROFILE("UnknownAadProfile",
            "upgrade strongroom on the reading side; if it is current, the record is corrupt"),
    UNKNOWN_VALUE_MODE("UnknownValueMode",
            "upgrade strongroom on the reading side; if it is current, the header is corrupt"),
    INTEGRITY_ERROR("IntegrityError", "it may have been moved or tampered with — quarantine it"),
    UNENCRYPTED_FIELD("UnencryptedField",
            "quarantine the record and check who can write to the topic and the producer's rules"),
    STRAY_ENVELOPE("StrayEnvelope",
            "the producer wrote a value that looks encrypted outside the topic's encrypted fields; "
                    + "fix the producer, or add the field to the rule"),
    UNVERIFIED_ENVELOPE("UnverifiedEnvelope",
            "only values this strongroom sealed for this subject, topic and field are kept as they are; "
                    + "send the plaintext value and let strongroom encrypt it"),
    SUBJECT_ERASED("SubjectErased", "expected after a GDPR erasure; treat the data as deleted"),
    NOT_JSON("NotJson",
            "JSON field encryption needs UTF-8 JSON values; use whole-value mode for this topic or fix the producer"),
    NOT_JSON_OBJECT("NotJsonObject",
            "JSON field encryption needs UTF-8 JSON values; use whole-value mode for this topic or fix the producer"),
    ENCODING_LIMIT_EXCEEDED("EncodingLimitExceeded", "shorten the value named above; the wire format cannot carry it"),
    INVALID_FIELD_PATH("InvalidFieldPath", "write field paths like $.email, $.address.city or $.items[*].email"),
    INVALID_KEY_REF("InvalidKeyRef",
            "pass a 16-byte subject key id, or a 'provider:kek-id' reference and a non-empty EDEK"),
    INVALID_DEK("InvalidDek",
            "the key source returned something that is not a 32-byte AES-256 key; check it"),
    // schema-aware mode (strongroom.schemas.errors)
    NOT_FRAMED("NotFramed",
            "schema-aware rules read values written by a schema-registry serializer (Avro, JSON Schema, Protobuf); "
                    + "use mode 'value' or 'fields' for this topic, or fix the producer"),
    UNKNOWN_SCHEMA_ID("UnknownSchemaId",
            "check that producers and strongroom use the same schema registry (URL and context)"),
    PAYLOAD_MISMATCH("PayloadMismatch",
            "the producer wrote bytes its schema does not describe; quarantine the record and check it"),
    TAGGED_FIELD_TYPE("TaggedFieldType",
            "tag only string or bytes fields, or change the field's type (strongroom keeps records valid for "
                    + "their schema, so a sealed value must be a string or bytes)"),
    UNSUPPORTED_SCHEMA("UnsupportedSchema", "see docs/schema-aware.md for what is supported"),
    UNKNOWN_FIELD_PATH("UnknownFieldPath",
            "fix the rule's field path (dotted, [*] for array items and map values) or the schema");

    private final String pythonName;
    private final String hint;

    ErrorKind(String pythonName, String hint) {
        this.pythonName = pythonName;
        this.hint = hint;
    }

    /** The name of the matching Python error class (the reason both engines count under). */
    /** The kind whose Python error class is {@code name}, or null. */
    public static ErrorKind ofPythonName(String name) {
        for (ErrorKind kind : values()) {
            if (kind.pythonName.equals(name)) {
                return kind;
            }
        }
        return null;
    }

    public String pythonName() {
        return pythonName;
    }

    /** What the operator should do next. */
    public String hint() {
        return hint;
    }
}
