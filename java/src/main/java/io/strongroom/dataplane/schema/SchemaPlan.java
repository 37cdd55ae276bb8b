package io.strongroom.dataplane.schema;

import com.fasterxml.jackson.databind.JsonNode;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One schema id under one rule, as the driver's key service answered {@code schema_plan}: the Avro schema or
 * JSON Schema and the targets, or the Protobuf descriptors and each message's targets, or why the rule cannot be applied to records of this id (a tagged int field, an
 * unknown id), which every record of the id then fails with.
 */
final class SchemaPlan {
    private final RecordFormat format;
    private final List<FieldTarget> targets;
    private final EnvelopeException refusal;
    private final int fixedValueCount;

    private SchemaPlan(RecordFormat format, List<FieldTarget> targets, EnvelopeException refusal) {
        this.format = format;
        this.targets = targets;
        this.refusal = refusal;
        boolean fixed = !(format instanceof ProtobufFormat) && targets.stream().allMatch(t -> t.steps().stream()
                .allMatch(step -> step.kind() == FieldTarget.Kind.FIELD));
        this.fixedValueCount = fixed ? targets.size() : -1;
    }

    /** The plan the driver sent for {@code schemaId}. */
    static SchemaPlan of(int schemaId, JsonNode answer) {
        EnvelopeException refused = refusal(answer);
        if (refused != null) {
            return new SchemaPlan(null, List.of(), refused);
        }
        String type = answer.path("type").asText();
        String schema = answer.path("schema").asText();
        RecordFormat format;
        try {
            format = switch (type) {
                case "AVRO" -> new AvroFormat(schema, "Avro schema id " + schemaId);
                case "JSON" -> new JsonSchemaFormat(schema, "JSON Schema schema id " + schemaId);
                case "PROTOBUF" -> protobuf(schemaId, answer);
                default -> throw new SchemaEngineException("schema id " + schemaId + " is of the schema type " + type
                        + ", which the JVM engine does not read", "see docs/schema-aware.md for what is supported");
            };
        } catch (EnvelopeException unreadable) { // kept as the id's refusal: not asked for again per record
            return new SchemaPlan(null, List.of(), unreadable);
        }
        return new SchemaPlan(format, format instanceof ProtobufFormat ? List.of() : targets(answer.path("targets")),
                null);
    }

    /** Why the rule cannot apply ({@code {"refused": ...}} in {@code answer}), or null when it can. */
    private static EnvelopeException refusal(JsonNode answer) {
        JsonNode refused = answer.path("refused");
        if (refused.isMissingNode() || refused.isNull()) {
            return null;
        }
        ErrorKind kind = ErrorKind.ofPythonName(refused.path("kind").asText());
        if (kind == null) {
            throw new SchemaEngineException(refused.path("problem").asText(), refused.path("hint").asText());
        }
        return new EnvelopeException(kind, refused.path("problem").asText());
    }

    private static List<FieldTarget> targets(JsonNode answer) {
        List<FieldTarget> targets = new ArrayList<>();
        for (JsonNode t : answer) {
            List<FieldTarget.Step> steps = new ArrayList<>();
            for (JsonNode s : t.path("steps")) {
                steps.add(new FieldTarget.Step(FieldTarget.Kind.valueOf(s.get(0).asText().toUpperCase(Locale.ROOT)),
                        s.get(1).isNull() ? null : s.get(1).asText(), s.get(2).isNull() ? null : s.get(2).asText()));
            }
            targets.add(new FieldTarget(t.path("path").asText(), List.copyOf(steps),
                    "bytes".equals(t.path("kind").asText()), t.path("nullable").asBoolean()));
        }
        return List.copyOf(targets);
    }

    /** A Protobuf plan: the compiled descriptors and, per message, its targets or its refusal. */
    private static ProtobufFormat protobuf(int schemaId, JsonNode answer) {
        Map<String, ProtobufFormat.MessageTargets> messages = new LinkedHashMap<>();
        answer.path("messages").fields().forEachRemaining(message -> {
            EnvelopeException refused = refusal(message.getValue());
            messages.put(message.getKey(), new ProtobufFormat.MessageTargets(
                    refused != null ? List.of() : targets(message.getValue().path("targets")), refused));
        });
        return new ProtobufFormat(Base64.getDecoder().decode(answer.path("descriptors").asText()),
                answer.path("file").asText(), messages, "Protobuf schema id " + schemaId);
    }

    /** The records' reader and writer; throws the refusal when the rule cannot be applied to this schema id. */
    RecordFormat format() {
        if (refusal != null) {
            throw new EnvelopeException(refusal.kind(), refusal.problem());
        }
        return format;
    }

    List<FieldTarget> targets() {
        return targets;
    }

    /**
     * How many fields a record of this id has to seal at most when the schema alone says (targets outside arrays and
     * maps), else -1 ({@code SchemaPlan.fixed_value_count} in {@code schemas/sealing.py}).
     */
    int fixedValueCount() {
        return fixedValueCount;
    }
}
