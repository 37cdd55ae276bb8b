package io.strongroom.dataplane.codec;

import java.util.Arrays;

/**
 * Splits an envelope into its fields, checking every id and length in the order docs/wire-format.md
 * gives (the same order and error kinds as {@code strongroom.envelope.codec.parse}). Does not decrypt.
 */
public final class EnvelopeParser {
    private static final int FIXED_HEADER_SIZE = 4;
    private static final int MIN_TAIL = WireIds.NONCE_SIZE + WireIds.TAG_SIZE;

    private EnvelopeParser() {
    }

    public static ParsedEnvelope parse(byte[] envelope) {
        int size = envelope.length;
        checkFixedHeader(envelope);
        byte kind = envelope[3];
        KeyRef keyRef;
        int end;
        if (kind == WireIds.KIND_SUBJECT_KEY) {
            end = FIXED_HEADER_SIZE + WireIds.SUBJECT_KEY_ID_SIZE;
            if (size < end) {
                throw malformed("envelope of " + size + " bytes is truncated inside its subject key id");
            }
            keyRef = new SubjectKeyRef(Arrays.copyOfRange(envelope, FIXED_HEADER_SIZE, end));
        } else if (kind == WireIds.KIND_WRAPPED_DEK) {
            end = wrappedDekEnd(envelope);
            keyRef = wrappedDek(envelope, end);
        } else {
            throw new EnvelopeException(ErrorKind.UNKNOWN_KEY_REF_KIND,
                    "envelope key-reference kind " + Hex.byteId(kind) + " is not a known kind");
        }
        if (size <= end) {
            throw malformed("envelope of " + size + " bytes is truncated before its AAD profile byte");
        }
        AadProfile profile = AadProfile.fromId(envelope[end]);
        if (profile == null) {
            throw new EnvelopeException(ErrorKind.UNKNOWN_AAD_PROFILE,
                    "envelope AAD profile " + Hex.byteId(envelope[end]) + " is not a known profile");
        }
        int body = end + 1;
        if (size - body < MIN_TAIL) {
            throw malformed("envelope is truncated: " + (size - body) + " bytes after the header, at least "
                    + MIN_TAIL + " needed (nonce and tag)");
        }
        int nonceEnd = body + WireIds.NONCE_SIZE;
        return new ParsedEnvelope(keyRef, profile, Arrays.copyOfRange(envelope, 0, body),
                Arrays.copyOfRange(envelope, body, nonceEnd), Arrays.copyOfRange(envelope, nonceEnd, size));
    }

    private static void checkFixedHeader(byte[] envelope) {
        int size = envelope.length;
        if (size == 0 || envelope[0] != WireIds.MAGIC) {
            String first = size == 0 ? "nothing" : Hex.byteId(envelope[0]);
            throw new EnvelopeException(ErrorKind.NOT_AN_ENVELOPE,
                    "value does not start with the envelope magic byte 0xF5 (found " + first + ")");
        }
        if (size < FIXED_HEADER_SIZE) {
            throw malformed("envelope of " + size + " bytes is shorter than its 4-byte fixed header");
        }
        if (envelope[1] != WireIds.FORMAT_V1) {
            throw new EnvelopeException(ErrorKind.UNSUPPORTED_FORMAT_VERSION,
                    "envelope format version " + Hex.byteId(envelope[1]) + "; this strongroom reads 0x01");
        }
        if (envelope[2] != WireIds.CIPHER_AES_256_GCM) {
            throw new EnvelopeException(ErrorKind.UNKNOWN_CIPHER,
                    "envelope cipher id " + Hex.byteId(envelope[2]) + " is not a known cipher");
        }
    }

    /** Where the WRAPPED_DEK key reference ends, after checking both lengths. */
    private static int wrappedDekEnd(byte[] envelope) {
        int size = envelope.length;
        int pos = FIXED_HEADER_SIZE;
        if (size < pos + 2) {
            throw malformed("envelope of " + size + " bytes is truncated inside its KEK reference length");
        }
        int kekLength = u16(envelope, pos);
        pos += 2;
        if (kekLength == 0 || size < pos + kekLength + 2) {
            throw malformed("envelope of " + size + " bytes has a bad KEK reference length " + kekLength);
        }
        pos += kekLength;
        int edekLength = u16(envelope, pos);
        pos += 2;
        if (edekLength == 0 || size < pos + edekLength) {
            throw malformed("envelope of " + size + " bytes has a bad EDEK length " + edekLength);
        }
        return pos + edekLength;
    }

    private static WrappedDekRef wrappedDek(byte[] envelope, int end) {
        int kekLength = u16(envelope, FIXED_HEADER_SIZE);
        int kekStart = FIXED_HEADER_SIZE + 2;
        String kekRef = Utf8.decodeOrNull(Arrays.copyOfRange(envelope, kekStart, kekStart + kekLength));
        if (kekRef == null) {
            throw malformed("envelope KEK reference is not UTF-8");
        }
        int colon = kekRef.indexOf(':');
        if (colon <= 0 || colon == kekRef.length() - 1) {
            throw malformed("envelope KEK reference " + Hex.show(kekRef) + " is not 'provider:kek-id'");
        }
        int edekStart = kekStart + kekLength + 2;
        return new WrappedDekRef(kekRef, Arrays.copyOfRange(envelope, edekStart, end));
    }

    private static int u16(byte[] bytes, int pos) {
        return ((bytes[pos] & 0xFF) << 8) | (bytes[pos + 1] & 0xFF);
    }

    private static EnvelopeException malformed(String problem) {
        return new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE, problem);
    }
}
