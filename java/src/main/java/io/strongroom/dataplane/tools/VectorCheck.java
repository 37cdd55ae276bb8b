package io.strongroom.dataplane.tools;

import com.fasterxml.jackson.databind.JsonNode;
import io.strongroom.dataplane.codec.AadProfile;
import io.strongroom.dataplane.codec.Aad;
import io.strongroom.dataplane.codec.EnvelopeCodec;
import io.strongroom.dataplane.codec.Hex;
import io.strongroom.dataplane.codec.KeyRef;
import io.strongroom.dataplane.codec.RecordContext;
import io.strongroom.dataplane.codec.RecordMarker;
import io.strongroom.dataplane.codec.ValueMode;
import io.strongroom.dataplane.codec.WireIds;
import io.strongroom.dataplane.json.FieldRules;
import io.strongroom.dataplane.json.InvalidJson;
import io.strongroom.dataplane.json.JsonFieldCodec;
import io.strongroom.dataplane.json.OnErased;
import io.strongroom.dataplane.json.PyJson;
import io.strongroom.dataplane.json.StrictJson;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Checks one frozen vector of tests/compat/vectors: the record header, the AAD, opening the sealed
 * value, and re-sealing with the vector's fixed nonces to the identical bytes. Returns the mismatches.
 */
final class VectorCheck {
    private final JsonNode vector;
    private final List<String> mismatches = new ArrayList<>();

    VectorCheck(JsonNode vector) {
        this.vector = vector;
    }

    List<String> run() throws InvalidJson {
        ValueMode mode = ValueMode.valueOf(vector.path("value_mode").asText().toUpperCase(Locale.ROOT));
        JsonNode header = vector.path("record_header");
        expect("record header name", WireIds.RECORD_HEADER_NAME, header.path("name").asText());
        byte[] headerValue = Hex.parse(header.path("value_hex").asText());
        expect("record header value", Hex.of(RecordMarker.headerValue(mode)), Hex.of(headerValue));
        expect("record header mode", mode, RecordMarker.parse(headerValue));
        if (mode == ValueMode.WHOLE_VALUE) {
            checkWholeValue();
        } else {
            checkFields();
        }
        return mismatches;
    }

    private void checkWholeValue() {
        byte[] envelope = Hex.parse(vector.path("envelope_hex").asText());
        byte[] plaintext = Hex.parse(vector.path("plaintext_hex").asText());
        expect("AAD", vector.path("aad_hex").asText(), Hex.of(Aad.forContext(keyRef(), context(), "")));
        byte[] opened = new EnvelopeCodec(fixedNonces()).decryptValue(envelope, this::lookup, context(), Map.of());
        expect("opened plaintext", Hex.of(plaintext), Hex.of(opened));
        byte[] resealed = new EnvelopeCodec(fixedNonces()).seal(plaintext, dek(), keyRef(), context(), "");
        expect("re-sealed envelope", Hex.of(envelope), Hex.of(resealed));
    }

    private void checkFields() throws InvalidJson {
        List<String> ruleTexts = new ArrayList<>();
        vector.path("rules").forEach(rule -> ruleTexts.add(rule.asText()));
        FieldRules rules = new FieldRules(ruleTexts);
        vector.path("field_aads_hex").fields().forEachRemaining(entry -> expect("AAD of " + entry.getKey(),
                entry.getValue().asText(), Hex.of(Aad.forContext(keyRef(), context(), entry.getKey()))));
        byte[] original = utf8("value_utf8");
        byte[] sealed = utf8("sealed_value_utf8");
        String compact = PyJson.write(StrictJson.parse(new String(original, StandardCharsets.UTF_8)));
        JsonFieldCodec codec = new JsonFieldCodec(new EnvelopeCodec(fixedNonces()));
        byte[] opened = codec.decrypt(sealed, this::lookup, context(), Map.of(), OnErased.RAISE, null);
        expect("opened document", compact, new String(opened, StandardCharsets.UTF_8));
        byte[] openedByRules = codec.decrypt(sealed, this::lookup, context(), Map.of(), OnErased.RAISE, rules);
        expect("opened document (rules known)", compact, new String(openedByRules, StandardCharsets.UTF_8));
        byte[] resealed = new JsonFieldCodec(new EnvelopeCodec(fixedNonces()))
                .encrypt(original, rules, dek(), keyRef(), context());
        expect("re-sealed document", new String(sealed, StandardCharsets.UTF_8),
                new String(resealed, StandardCharsets.UTF_8));
    }

    private byte[] lookup(KeyRef seen) {
        expect("key reference in the envelope", keyRef(), seen);
        return dek();
    }

    private void expect(String what, Object expected, Object actual) {
        if (!expected.equals(actual)) {
            mismatches.add(what + ": expected " + expected + ", got " + actual);
        }
    }

    private RecordContext context() {
        JsonNode ctx = vector.path("context");
        return new RecordContext(ctx.path("topic").asText(), Hex.parse(ctx.path("subject_hex").asText()),
                AadProfile.valueOf(ctx.path("profile").asText().toUpperCase(Locale.ROOT)));
    }

    private KeyRef keyRef() {
        return Operation.keyRef(vector.path("key_ref"));
    }

    private byte[] dek() {
        return Hex.parse(vector.path("dek_hex").asText());
    }

    private byte[] utf8(String field) {
        return vector.path(field).asText().getBytes(StandardCharsets.UTF_8);
    }

    private FixedNonces fixedNonces() {
        List<byte[]> nonces = new ArrayList<>();
        vector.path("nonces_hex").forEach(n -> nonces.add(Hex.parse(n.asText())));
        return new FixedNonces(nonces);
    }
}
