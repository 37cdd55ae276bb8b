package io.strongroom.dataplane.tools;

import com.fasterxml.jackson.databind.JsonNode;
import io.strongroom.dataplane.codec.AadProfile;
import io.strongroom.dataplane.codec.DrbgNonceSource;
import io.strongroom.dataplane.codec.EnvelopeCodec;
import io.strongroom.dataplane.codec.Hex;
import io.strongroom.dataplane.codec.KeyLookup;
import io.strongroom.dataplane.codec.KeyRef;
import io.strongroom.dataplane.codec.NonceSource;
import io.strongroom.dataplane.codec.RecordContext;
import io.strongroom.dataplane.codec.RecordMarker;
import io.strongroom.dataplane.codec.SubjectKeyRef;
import io.strongroom.dataplane.codec.WrappedDekRef;
import io.strongroom.dataplane.json.FieldRules;
import io.strongroom.dataplane.json.JsonFieldCodec;
import io.strongroom.dataplane.json.OnErased;
import io.strongroom.dataplane.schema.SchemaFieldCodec;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One codec call described in JSON (the test protocol of {@link CodecTool}; the pytest side builds the
 * same call on the Python codec):
 * {@code {"op": "seal_value|open_value|seal_fields|open_fields|seal_schema|open_schema|parse_marker", "input_hex",
 * "dek_hex", "key_ref", "topic", "subject_hex", "profile", "field_path", "rules", "nonces_hex", "keys", "on_erased",
 * "topic_map", "schema_plan"}} ({@code schema_plan}: the driver's answer to {@code schema_plan} for the record's
 * schema id).
 *
 * <p>With a {@link Shared} codec ({@code CodecTool ops shared}) every operation of the run goes through one codec, as a
 * task's records do: its kept ciphers carry over from one operation to the next; {@code "forget_keys": true} calls
 * {@link EnvelopeCodec#forgetKeys} first, as a task does after a chunk.
 */
final class Operation {
    /** One codec for a whole run; each operation still seals with its own fixed nonces (or random ones). */
    static final class Shared {
        private NonceSource current; // the running operation's, set by run before the codec is used
        private final EnvelopeCodec codec = new EnvelopeCodec(() -> current.nextNonce());
    }
    /** The key table of an open operation has no entry for the envelope's key. */
    static final class UnknownKey extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UnknownKey() {
            super("no key for this reference", null, false, false);
        }
    }

    private final JsonNode spec;

    Operation(JsonNode spec) {
        this.spec = spec;
    }

    /** The operation on {@code shared}'s codec, or on a codec of its own when it is null. */
    byte[] run(Shared shared) {
        byte[] input = Hex.parse(spec.path("input_hex").asText());
        if (spec.path("op").asText().equals("parse_marker")) {
            return new byte[] {RecordMarker.parse(input).id()};
        }
        EnvelopeCodec codec;
        if (shared == null) {
            codec = new EnvelopeCodec(nonces());
        } else {
            shared.current = nonces();
            codec = shared.codec;
            if (spec.path("forget_keys").asBoolean(false)) {
                codec.forgetKeys();
            }
        }
        RecordContext ctx = new RecordContext(spec.path("topic").asText(), Hex.parse(spec.path("subject_hex").asText()),
                AadProfile.valueOf(spec.path("profile").asText("topic").toUpperCase(Locale.ROOT)));
        String op = spec.path("op").asText();
        switch (op) {
            case "seal_value":
                return codec.seal(input, dek(spec), keyRef(spec.path("key_ref")), ctx, spec.path("field_path").asText(""));
            case "open_value":
                return codec.decryptValue(input, keys(), ctx, topicMap());
            case "seal_fields":
                return new JsonFieldCodec(codec).encrypt(input, rules(), dek(spec), keyRef(spec.path("key_ref")), ctx);
            case "open_fields":
                OnErased onErased = OnErased.valueOf(spec.path("on_erased").asText("null").toUpperCase(Locale.ROOT));
                return new JsonFieldCodec(codec).decrypt(input, keys(), ctx, topicMap(), onErased,
                        spec.path("rules").isArray() ? rules() : null);
            case "seal_schema":
                return schema(codec).seal("source", input, dek(spec), keyRef(spec.path("key_ref")), ctx);
            case "open_schema":
                return schema(codec).open("source", input, keys(), ctx);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** Schema mode with the driver's plan for the record's schema id given in the operation. */
    private SchemaFieldCodec schema(EnvelopeCodec codec) {
        JsonNode plan = spec.path("schema_plan");
        return new SchemaFieldCodec(codec, (topic, schemaId) -> plan);
    }

    private NonceSource nonces() {
        if (!spec.path("nonces_hex").isArray()) {
            return new DrbgNonceSource();
        }
        List<byte[]> nonces = new ArrayList<>();
        spec.path("nonces_hex").forEach(n -> nonces.add(Hex.parse(n.asText())));
        return new FixedNonces(nonces);
    }

    private FieldRules rules() {
        List<String> rules = new ArrayList<>();
        spec.path("rules").forEach(rule -> rules.add(rule.asText()));
        return new FieldRules(rules);
    }

    private Map<String, String> topicMap() {
        Map<String, String> map = new HashMap<>();
        Iterator<Map.Entry<String, JsonNode>> entries = spec.path("topic_map").fields();
        entries.forEachRemaining(e -> map.put(e.getKey(), e.getValue().asText()));
        return map;
    }

    /** The key table: a DEK per key reference, {@code null} for an erased key, none for an unknown one. */
    private KeyLookup keys() {
        Map<KeyRef, byte[]> table = new HashMap<>();
        for (JsonNode entry : spec.path("keys")) {
            table.put(keyRef(entry.path("key_ref")), entry.path("dek_hex").isNull() ? null : dek(entry));
        }
        return ref -> {
            if (!table.containsKey(ref)) {
                throw new UnknownKey();
            }
            return table.get(ref);
        };
    }

    private static byte[] dek(JsonNode node) {
        return Hex.parse(node.path("dek_hex").asText());
    }

    static KeyRef keyRef(JsonNode ref) {
        if ("subject_key".equals(ref.path("kind").asText())) {
            return new SubjectKeyRef(Hex.parse(ref.path("key_id_hex").asText()));
        }
        return new WrappedDekRef(ref.path("kek_ref").asText(), Hex.parse(ref.path("edek_hex").asText()));
    }
}
