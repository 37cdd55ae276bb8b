package io.strongroom.dataplane.codec;

import java.security.GeneralSecurityException;
import java.util.Map;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Seals and opens one envelope with the JDK's {@code AES/GCM/NoPadding}. One instance per task (it holds
 * a {@link Cipher} and its nonce source; neither is thread-safe). Opening never releases plaintext before
 * the tag has been verified over the whole ciphertext: the JCA's GCM decryption buffers until the tag.
 */
public final class EnvelopeCodec {
    private static final int TAG_BITS = WireIds.TAG_SIZE * 8;

    private final NonceSource nonces;
    private final Cipher cipher;

    public EnvelopeCodec(NonceSource nonces) {
        this.nonces = nonces;
        try {
            this.cipher = Cipher.getInstance("AES/GCM/NoPadding");
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("this JDK has no AES/GCM/NoPadding", e);
        }
    }

    /** A codec with random nonces from its own DRBG. */
    public static EnvelopeCodec withDrbg() {
        return new EnvelopeCodec(new DrbgNonceSource());
    }

    /** Encrypt {@code plaintext} into an envelope bound to {@code ctx} (and {@code fieldPath} in field mode). */
    public byte[] seal(byte[] plaintext, byte[] dek, KeyRef keyRef, RecordContext ctx, String fieldPath) {
        byte[] header = keyRef.header(ctx.profile());
        String topic = ctx.profile() == AadProfile.PORTABLE ? "" : ctx.topic();
        byte[] aad = Aad.build(header, topic, ctx.subject(), fieldPath);
        SecretKeySpec key = aesKey(dek);
        byte[] nonce = nonces.nextNonce();
        int start = header.length + nonce.length;
        byte[] envelope = new byte[start + plaintext.length + WireIds.TAG_SIZE];
        System.arraycopy(header, 0, envelope, 0, header.length);
        System.arraycopy(nonce, 0, envelope, header.length, nonce.length);
        try { // the ciphertext and tag straight after the nonce: no second copy of the sealed bytes
            cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, nonce));
            cipher.updateAAD(aad);
            int written = cipher.doFinal(plaintext, 0, plaintext.length, envelope, start);
            if (written != plaintext.length + WireIds.TAG_SIZE) {
                throw new IllegalStateException("AES-GCM wrote " + written + " bytes for " + plaintext.length);
            }
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("AES-GCM failed: " + e.getClass().getSimpleName(), e);
        }
        return envelope;
    }

    /**
     * Authenticate and decrypt; {@link ErrorKind#INTEGRITY_ERROR} if the envelope does not belong here.
     * {@code topicMap} maps physical topic names to the logical names the data was sealed under.
     */
    public byte[] open(ParsedEnvelope parsed, byte[] dek, RecordContext ctx, String fieldPath,
            Map<String, String> topicMap) {
        String topic = parsed.profile() == AadProfile.PORTABLE ? "" : topicMap.getOrDefault(ctx.topic(), ctx.topic());
        byte[] aad = Aad.build(parsed.header(), topic, ctx.subject(), fieldPath);
        SecretKeySpec key = aesKey(dek);
        try {
            return run(Cipher.DECRYPT_MODE, key, parsed.nonce(), aad, parsed.ciphertext());
        } catch (IntegrityFailure e) {
            String where = parsed.profile() == AadProfile.PORTABLE ? "any topic (portable)" : "topic '" + topic + "'";
            String field = fieldPath.isEmpty() ? "" : ", field " + fieldPath;
            throw new EnvelopeException(ErrorKind.INTEGRITY_ERROR, "record does not belong to " + where
                    + " / subject " + Hex.fingerprint(ctx.subject()) + field + " under key " + parsed.keyRef()
                    + ", or was altered");
        }
    }

    /** Parse, look up the key and open a whole-value envelope; {@link ErrorKind#SUBJECT_ERASED} if it is gone. */
    public byte[] decryptValue(byte[] envelope, KeyLookup keys, RecordContext ctx, Map<String, String> topicMap) {
        ParsedEnvelope parsed = EnvelopeParser.parse(envelope);
        byte[] dek = keys.dekFor(parsed.keyRef());
        if (dek == null) {
            throw new EnvelopeException(ErrorKind.SUBJECT_ERASED, "the key " + parsed.keyRef() + " of subject "
                    + Hex.fingerprint(ctx.subject()) + " was erased");
        }
        return open(parsed, dek, ctx, "", topicMap);
    }

    private static SecretKeySpec aesKey(byte[] dek) {
        if (dek == null || dek.length != WireIds.KEY_SIZE) {
            String size = dek == null ? "null" : String.valueOf(dek.length);
            throw new EnvelopeException(ErrorKind.INVALID_DEK,
                    "a DEK must be " + WireIds.KEY_SIZE + " bytes of type bytes, got " + size);
        }
        return new SecretKeySpec(dek, "AES");
    }

    private byte[] run(int mode, SecretKeySpec key, byte[] nonce, byte[] aad, byte[] input) {
        try {
            cipher.init(mode, key, new GCMParameterSpec(TAG_BITS, nonce));
            cipher.updateAAD(aad);
            return cipher.doFinal(input);
        } catch (AEADBadTagException e) {
            throw new IntegrityFailure();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("AES-GCM failed: " + e.getClass().getSimpleName(), e);
        }
    }

    /** The tag did not verify (internal: turned into an {@link ErrorKind#INTEGRITY_ERROR} with context). */
    private static final class IntegrityFailure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        IntegrityFailure() {
            super("tag mismatch", null, false, false);
        }
    }
}
