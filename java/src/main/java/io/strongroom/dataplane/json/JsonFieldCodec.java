package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.EnvelopeCodec;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.EnvelopeParser;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.codec.Hex;
import io.strongroom.dataplane.codec.KeyLookup;
import io.strongroom.dataplane.codec.KeyRef;
import io.strongroom.dataplane.codec.RecordContext;
import io.strongroom.dataplane.codec.Utf8;
import io.strongroom.dataplane.codec.WireIds;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * JSON field mode ({@code strongroom.envelope.json_fields}): each selected value becomes
 * {@code "sr1:" + base64(envelope)} of its compact JSON text; the output is the document re-serialised
 * compactly, or the input byte for byte when nothing was sealed. Refusals, their order and their kinds
 * are the Python codec's (docs/wire-format.md, "Field mode: what is refused").
 */
public final class JsonFieldCodec {
    private final EnvelopeCodec codec;

    public JsonFieldCodec(EnvelopeCodec codec) {
        this.codec = codec;
    }

    /** Seal the fields {@code rules} select; an already sealed rule field is kept only if it opens here. */
    public byte[] encrypt(byte[] value, FieldRules rules, byte[] dek, KeyRef keyRef, RecordContext ctx) {
        Map<String, Object> document = DocumentReader.load(value);
        List<Slot> targets = DocumentWalk.ruleSlots(document, rules);
        if (DocumentReader.mayHoldEnvelopes(value)) {
            refuseStrays(document, targets);
        }
        boolean changed = false;
        for (Slot target : targets) {
            Object current = target.get();
            if (SealedText.isSealed(current)) {
                verifyPresealed(value, (String) current, dek, ctx, target.path());
                continue;
            }
            byte[] plaintext = DocumentReader.utf8(DocumentReader.write(current));
            byte[] envelope = codec.seal(plaintext, dek, keyRef, ctx, target.path());
            target.set(WireIds.FIELD_PREFIX + Base64.getEncoder().encodeToString(envelope));
            changed = true;
        }
        return changed ? DocumentReader.utf8(DocumentReader.write(document)) : value;
    }

    /**
     * How many values {@link #encrypt} seals in {@code value} at most (present selected values, sealed or not): what
     * the record charges its key's usage limit ({@code rule_value_count} in {@code envelope/json_fields.py}).
     * {@link EnvelopeException} when {@code value} is not a JSON object.
     */
    public static int valueCount(byte[] value, FieldRules rules) {
        int fixed = rules.fixedValueCount();
        return fixed >= 0 ? fixed : DocumentWalk.ruleSlots(DocumentReader.load(value), rules).size();
    }

    private static void refuseStrays(Map<String, Object> document, List<Slot> targets) {
        Map<Object, Set<Object>> targeted = new IdentityHashMap<>();
        for (Slot target : targets) {
            targeted.computeIfAbsent(target.container(), c -> new HashSet<>()).add(target.key());
        }
        for (Slot found : DocumentWalk.sealedStrings(document)) {
            if (!targeted.getOrDefault(found.container(), Collections.emptySet()).contains(found.key())) {
                throw new EnvelopeException(ErrorKind.STRAY_ENVELOPE, "field " + found.path()
                        + " holds an 'sr1:' string but is not one of the rule's fields; strongroom will not pass on "
                        + "something that looks encrypted where nothing is");
            }
        }
    }

    private void verifyPresealed(byte[] raw, String text, byte[] dek, RecordContext ctx, String path) {
        SealedText.checkSpelling(raw, text, path);
        try {
            codec.open(EnvelopeParser.parse(SealedText.decode(text)), dek, ctx, path, Map.of());
        } catch (EnvelopeException e) {
            throw new EnvelopeException(ErrorKind.UNVERIFIED_ENVELOPE, "field " + path
                    + " already holds an 'sr1:' string that does not open under this subject's key for this topic "
                    + "and field (" + e.kind().pythonName() + ")");
        }
    }

    /**
     * Open the sealed fields; all or nothing. With {@code rules} (may be null) only the rule fields are
     * opened and a plaintext value at one of them is {@link ErrorKind#UNENCRYPTED_FIELD}.
     */
    public byte[] decrypt(byte[] value, KeyLookup keys, RecordContext ctx, Map<String, String> topicMap,
            OnErased onErased, FieldRules rules) {
        FieldDocument doc = new FieldDocument(value, rules);
        if (!doc.plaintextFields().isEmpty()) {
            throw new EnvelopeException(ErrorKind.UNENCRYPTED_FIELD,
                    "field " + doc.plaintextFields().get(0) + " should be encrypted but holds plaintext");
        }
        if (doc.sealed().isEmpty()) {
            return doc.raw();
        }
        Map<ByteBuffer, byte[]> deks = new HashMap<>(); // by envelope header: one lookup per key per document
        Object[] plaintexts = new Object[doc.sealed().size()];
        for (int i = 0; i < plaintexts.length; i++) {
            FieldDocument.SealedField field = doc.sealed().get(i);
            ByteBuffer header = ByteBuffer.wrap(field.envelope().header());
            if (!deks.containsKey(header)) {
                deks.put(header, keys.dekFor(field.envelope().keyRef()));
            }
            byte[] dek = deks.get(header);
            if (dek == null) {
                if (onErased == OnErased.RAISE) {
                    throw new EnvelopeException(ErrorKind.SUBJECT_ERASED, "field " + field.slot().path()
                            + " of subject " + Hex.fingerprint(ctx.subject()) + " was sealed with the erased key "
                            + field.envelope().keyRef());
                }
                continue;
            }
            plaintexts[i] = openField(field, dek, ctx, topicMap);
        }
        for (int i = 0; i < plaintexts.length; i++) {
            doc.sealed().get(i).slot().set(plaintexts[i]);
        }
        return DocumentReader.utf8(DocumentReader.write(doc.document()));
    }

    private Object openField(FieldDocument.SealedField field, byte[] dek, RecordContext ctx,
            Map<String, String> topicMap) {
        String path = field.slot().path();
        byte[] plaintext = codec.open(field.envelope(), dek, ctx, path, topicMap);
        String text = Utf8.decodeOrNull(plaintext);
        try {
            if (text == null) {
                throw new InvalidJson("not UTF-8");
            }
            return StrictJson.parse(text);
        } catch (InvalidJson e) {
            throw new EnvelopeException(ErrorKind.MALFORMED_ENVELOPE,
                    "field " + path + " decrypted to something that is not JSON text; the producer is broken");
        }
    }
}
