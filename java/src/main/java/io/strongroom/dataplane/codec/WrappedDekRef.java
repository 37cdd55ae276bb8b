package io.strongroom.dataplane.codec;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** A provider-qualified KEK reference ({@code vault:orders-kek}) and the EDEK it wrapped. */
public final class WrappedDekRef implements KeyRef {
    private final String kekRef;
    private final byte[] edek;
    private final byte[] encoded;

    public WrappedDekRef(String kekRef, byte[] edek) {
        int colon = kekRef == null ? -1 : kekRef.indexOf(':');
        if (colon <= 0 || colon == kekRef.length() - 1) {
            throw new EnvelopeException(ErrorKind.INVALID_KEY_REF,
                    "a KEK reference is 'provider:kek-id', got " + (kekRef == null ? "null" : Hex.show(kekRef)));
        }
        if (Utf8.hasLoneSurrogate(kekRef)) {
            throw new EnvelopeException(ErrorKind.INVALID_KEY_REF, "a KEK reference holds a lone UTF-16 surrogate");
        }
        if (edek == null || edek.length == 0) {
            throw new EnvelopeException(ErrorKind.INVALID_KEY_REF, "an EDEK is a non-empty bytes value");
        }
        byte[] kekBytes = kekRef.getBytes(StandardCharsets.UTF_8);
        if (kekBytes.length > WireIds.MAX_U16 || edek.length > WireIds.MAX_U16) {
            throw new EnvelopeException(ErrorKind.ENCODING_LIMIT_EXCEEDED, "KEK reference (" + kekBytes.length
                    + " bytes) and EDEK (" + edek.length + " bytes) must each fit in 65535 bytes");
        }
        this.kekRef = kekRef;
        this.edek = edek.clone();
        ByteArrayOutputStream out = new ByteArrayOutputStream(kekBytes.length + edek.length + 4);
        out.write(kekBytes.length >>> 8);
        out.write(kekBytes.length);
        out.writeBytes(kekBytes);
        out.write(edek.length >>> 8);
        out.write(edek.length);
        out.writeBytes(edek);
        this.encoded = out.toByteArray();
    }

    public String kekRef() {
        return kekRef;
    }

    public byte[] edek() {
        return edek.clone();
    }

    @Override
    public byte kind() {
        return WireIds.KIND_WRAPPED_DEK;
    }

    @Override
    public byte[] encoded() {
        return encoded.clone();
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof WrappedDekRef ref && Arrays.equals(ref.encoded, encoded);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(encoded);
    }

    @Override
    public String toString() {
        return "WrappedDekRef(kek_ref='" + kekRef + "', edek=<" + edek.length + " bytes>)";
    }
}
