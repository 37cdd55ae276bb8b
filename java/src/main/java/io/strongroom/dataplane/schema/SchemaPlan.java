package io.strongroom.dataplane.schema;

import com.fasterxml.jackson.databind.JsonNode;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One schema id under one rule, as the driver's key service answered {@code schema_plan}: the Avro schema or
 * JSON Schema and the targets, or why the rule cannot be applied to records of this id (a tagged int field, an
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
        boolean fixed = targets.stream().allMatch(t -> t.steps().stream()
                .allMatch(step -> step.kind() == FieldTarget.Kind.FIELD));
        this.fixedValueCount = fixed ? targets.size() : -1;
    }

    /** The plan the driver sent for {@code schemaId}. */
    static SchemaPlan of(int schemaId, JsonNode answer) {
        JsonNode refused = answer.path("refused");
        if (!refused.isMissingNode() && !refused.isNull()) {
            ErrorKind kind = ErrorKind.ofPythonName(refused.path("kind").asText());
            if (kind == null) {
                throw new SchemaEngineException(refused.path("problem").asText(), refused.path("hint").asText());
            }
            return new SchemaPlan(null, List.of(), new EnvelopeException(kind, refused.path("problem").asText()));
        }
        String type = answer.path("type").asText();
        if (!"AVRO".equals(type) && !"JSON".equals(type)) {
            throw new SchemaEngineException("schema id " + schemaId + " is " + type.toLowerCase(Locale.ROOT)
                    + "; the JVM engine seals the fields of Avro and JSON Schema records only",
                    "run this pipeline with --engine python, which handles Avro, JSON Schema and Protobuf");
        }
        List<FieldTarget> targets = new ArrayList<>();
        for (JsonNode t : answer.path("targets")) {
            List<FieldTarget.Step> steps = new ArrayList<>();
            for (JsonNode s : t.path("steps")) {
                steps.add(new FieldTarget.Step(FieldTarget.Kind.valueOf(s.get(0).asText().toUpperCase(Locale.ROOT)),
                        s.get(1).isNull() ? null : s.get(1).asText(), s.get(2).isNull() ? null : s.get(2).asText()));
            }
            targets.add(new FieldTarget(t.path("path").asText(), List.copyOf(steps),
                    "bytes".equals(t.path("kind").asText()), t.path("nullable").asBoolean()));
        }
        String schema = answer.path("schema").asText();
        RecordFormat format = "AVRO".equals(type) ? new AvroFormat(schema, "Avro schema id " + schemaId)
                : new JsonSchemaFormat(schema, "JSON Schema schema id " + schemaId);
        return new SchemaPlan(format, List.copyOf(targets), null);
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
