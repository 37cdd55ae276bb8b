package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.EnvelopeParser;
import io.strongroom.dataplane.codec.ParsedEnvelope;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A parsed field-mode document and its sealed fields, read strictly ({@code json_fields.FieldDocument}).
 * With rules: the sealed fields at rule paths and the rule paths holding a present plaintext value.
 * Without: every {@code sr1:} string, each with the path derived from where it sits.
 */
final class FieldDocument {
    /** One {@code sr1:} string: where it sits and its parsed envelope. */
    record SealedField(Slot slot, ParsedEnvelope envelope) {
    }

    private final byte[] raw;
    private final Map<String, Object> document;
    private final List<SealedField> sealed = new ArrayList<>();
    private final List<String> plaintextFields = new ArrayList<>();

    FieldDocument(byte[] raw, FieldRules rules) {
        this.raw = raw;
        this.document = DocumentReader.load(raw);
        if (rules == null) {
            if (DocumentReader.mayHoldEnvelopes(raw)) {
                for (Slot slot : DocumentWalk.sealedStrings(document)) {
                    sealed.add(new SealedField(slot, parse((String) slot.get(), slot.path())));
                }
            }
            return;
        }
        for (Slot slot : DocumentWalk.ruleSlots(document, rules)) {
            Object current = slot.get();
            if (SealedText.isSealed(current)) {
                sealed.add(new SealedField(slot, parse((String) current, slot.path())));
            } else {
                plaintextFields.add(slot.path() + " (a JSON " + DocumentReader.typeName(current) + ")");
            }
        }
    }

    private ParsedEnvelope parse(String text, String path) {
        return EnvelopeParser.parse(SealedText.canonical(raw, text, path));
    }

    byte[] raw() {
        return raw;
    }

    Map<String, Object> document() {
        return document;
    }

    List<SealedField> sealed() {
        return sealed;
    }

    List<String> plaintextFields() {
        return plaintextFields;
    }
}
