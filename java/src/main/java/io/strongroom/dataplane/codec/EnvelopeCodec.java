package io.strongroom.dataplane.codec;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.security.GeneralSecurityException;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Seals and opens one envelope with the JDK's {@code AES/GCM/NoPadding}. One instance per task (it holds
 * {@link Cipher}s and its nonce source; neither is thread-safe). Opening never releases plaintext before
 * the tag has been verified over the whole ciphertext: the JCA's GCM decryption buffers until the tag.
 *
 * <p>A cipher per key met again, for up to {@link #KEPT_CIPHERS} keys. The JDK builds an AES key's schedule whenever
 * a cipher is initialised with a key other than its last one (about a tenth of a sealing task's time when every
 * record changes key). A key is sealed or opened with one passing cipher the first time the codec meets it; met again
 * before {@link #forgetKeys}, it gets a cipher of its own, whose schedule is then built once for all its records (a hot
 * subject, a tenant id as the subject). Keys met once (most, when subjects are many and evenly spread) cost what they
 * cost before: a cipher per key for them would only spread the ciphers' state over memory. The caller calls
 * {@link #forgetKeys} when the keys it passed are done with (after a chunk): no cipher then holds a key of that chunk,
 * so an erased key lives no longer in a cipher than in the chunk's own copy of it.
 */
public final class EnvelopeCodec {
    private static final int TAG_BITS = WireIds.TAG_SIZE * 8;
    /** Keys met again whose ciphers are kept (the least recently used is re-keyed first). */
    public static final int KEPT_CIPHERS = 256;
    /** Keys met once that the codec remembers (as {@link KeyBits}) to know them again; forgotten all at once when full. */
    static final int MET_ONCE = 512;
    private static final SecretKeySpec NO_KEY = new SecretKeySpec(new byte[WireIds.KEY_SIZE], "AES");
    private static final GCMParameterSpec NO_NONCE = new GCMParameterSpec(TAG_BITS, new byte[WireIds.NONCE_SIZE]);

    private final NonceSource nonces;
    private final LinkedHashMap<KeyBits, Cipher> ciphers = new LinkedHashMap<>(2 * KEPT_CIPHERS, 0.75f, true);
    private final HashSet<KeyBits> metOnce = new HashSet<>(2 * MET_ONCE);
    /** The cipher of keys met once (this JDK's AES/GCM, or a clear error at construction rather than per record). */
    private final Cipher passing = newCipher();
    /** Ciphers {@link #forgetKeys} set to a key of zeros, for the next keys. */
    private final ArrayDeque<Cipher> spare = new ArrayDeque<>();

    public EnvelopeCodec(NonceSource nonces) {
        this.nonces = nonces;
    }

    private static Cipher newCipher() {
        try {
            return Cipher.getInstance("AES/GCM/NoPadding");
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("this JDK has no AES/GCM/NoPadding", e);
        }
    }

    /**
     * The cipher for {@code dek} (checked: 32 bytes): its own for a key met again (re-keying the least recently used
     * kept one when all are taken), the passing one for a key met the first time.
     */
    private Cipher cipherFor(byte[] dek) {
        KeyBits bits = KeyBits.of(dek);
        Cipher cipher = ciphers.get(bits);
        if (cipher != null) {
            return cipher;
        }
        if (!metOnce.remove(bits)) {
            if (metOnce.size() >= MET_ONCE) {
                metOnce.clear();
            }
            metOnce.add(bits);
            return passing;
        }
        if (ciphers.size() >= KEPT_CIPHERS) {
            Iterator<Cipher> eldest = ciphers.values().iterator();
            cipher = eldest.next();
            eldest.remove();
        } else {
            cipher = spare.isEmpty() ? newCipher() : spare.pop();
        }
        ciphers.put(bits, cipher);
        return cipher;
    }

    /**
     * Done with the keys passed so far: every kept cipher is set to a key of zeros (the JDK then drops its reference
     * to the last key's schedule and overwrites its copy of the key) and waits for the next keys.
     */
    public void forgetKeys() {
        for (Cipher cipher : ciphers.values()) {
            zero(cipher);
            spare.push(cipher);
        }
        ciphers.clear();
        metOnce.clear();
        zero(passing);
    }

    private static void zero(Cipher cipher) {
        try {
            cipher.init(Cipher.DECRYPT_MODE, NO_KEY, NO_NONCE); // decrypt: no nonce-reuse check to trip
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("AES-GCM failed: " + e.getClass().getSimpleName(), e);
        }
    }

    /** A key's 32 bytes as four longs: the kept ciphers' map key, compared by value, never logged. */
    private record KeyBits(long a, long b, long c, long d) {
        private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class,
                ByteOrder.LITTLE_ENDIAN);

        static KeyBits of(byte[] dek) {
            return new KeyBits((long) LONGS.get(dek, 0), (long) LONGS.get(dek, 8), (long) LONGS.get(dek, 16),
                    (long) LONGS.get(dek, 24));
        }

        @Override
        public String toString() {
            return "KeyBits[hidden]";
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
        Cipher cipher = cipherFor(dek);
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
            return run(cipherFor(dek), key, parsed.nonce(), aad, parsed.ciphertext());
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

    private static byte[] run(Cipher cipher, SecretKeySpec key, byte[] nonce, byte[] aad, byte[] input) {
        try {
            cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, nonce));
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
