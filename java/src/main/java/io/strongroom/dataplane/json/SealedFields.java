package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.KeyRef;
import java.util.ArrayList;
import java.util.List;

/**
 * What a field-mode document holds sealed at the rule's fields, without decrypting: the key references a
 * reader must ask for, and whether anything is sealed at all ({@code FieldDocument.key_refs()} and
 * {@code .sealed} in {@code envelope/json_fields.py}). A document that cannot be read throws the codec's
 * {@link io.strongroom.dataplane.codec.EnvelopeException}.
 */
public final class SealedFields {
    private SealedFields() {
    }

    /** The key reference of every sealed rule field, in document order. */
    public static List<KeyRef> keyRefs(byte[] raw, FieldRules rules) {
        List<KeyRef> refs = new ArrayList<>();
        for (FieldDocument.SealedField field : new FieldDocument(raw, rules).sealed()) {
            refs.add(field.envelope().keyRef());
        }
        return refs;
    }

    /** True when at least one rule field is sealed. */
    public static boolean any(byte[] raw, FieldRules rules) {
        return !new FieldDocument(raw, rules).sealed().isEmpty();
    }
}
