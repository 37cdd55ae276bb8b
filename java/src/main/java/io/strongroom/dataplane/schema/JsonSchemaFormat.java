package io.strongroom.dataplane.schema;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.JsonNodePath;
import com.networknt.schema.JsonSchema;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.PathType;
import com.networknt.schema.SchemaValidatorsConfig;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.SpecVersionDetector;
import com.networknt.schema.ValidationMessage;
import com.networknt.schema.resource.AllowSchemaLoader;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.json.DocumentReader;
import io.strongroom.dataplane.json.InvalidJson;
import io.strongroom.dataplane.json.PyJson;
import io.strongroom.dataplane.schema.RecordFormat.Slot;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One JSON Schema ({@code json_format.py}): payloads are read strictly, as JSON field mode reads documents
 * ({@link DocumentReader}), validated against the schema before sealing (networknt's validator, as the Python
 * side uses {@code jsonschema}: the draft the schema's {@code $schema} names, draft 7 when it names none, format
 * annotations not asserted) and written back as Python writes them ({@link PyJson}), so both engines write the same
 * bytes. The schema never loads anything from the network: the driver refuses references that are not local, and
 * the validator may load only its own meta-schemas.
 */
final class JsonSchemaFormat implements RecordFormat {
    private static final TargetWalk.Navigator NAVIGATOR = TargetWalk.listsAndMaps(JsonSchemaFormat::memberSlot);
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final SchemaValidatorsConfig CONFIG = SchemaValidatorsConfig.builder()
            .formatAssertionsEnabled(false).pathType(PathType.LEGACY).build();

    private final String where;
    private final JsonSchema validator;

    JsonSchemaFormat(String text, String where) {
        this.where = where;
        JsonNode schema;
        try {
            schema = MAPPER.readTree(text);
        } catch (Exception e) {
            throw unusable(e);
        }
        SpecVersion.VersionFlag draft = SpecVersion.VersionFlag.V7;
        if (schema.has("$schema")) {
            draft = SpecVersionDetector.detectOptionalVersion(schema, false).orElseThrow(() -> new EnvelopeException(
                    ErrorKind.UNSUPPORTED_SCHEMA, where + " names the meta-schema " + schema.get("$schema")
                            + ", which is not a JSON Schema draft the JVM engine reads (4 to 2020-12); run this "
                            + "pipeline with --engine python"));
        }
        try {
            JsonSchemaFactory factory = JsonSchemaFactory.getInstance(draft, builder -> builder.schemaLoaders(
                    loaders -> loaders.values(list -> list.add(0, new AllowSchemaLoader(
                            iri -> iri.toString().startsWith("classpath:"))))));
            this.validator = factory.getSchema(schema, CONFIG);
            this.validator.initializeValidators();
        } catch (RuntimeException e) {
            throw unusable(e);
        }
    }

    private EnvelopeException unusable(Exception e) {
        return new EnvelopeException(ErrorKind.UNSUPPORTED_SCHEMA,
                where + " is not a usable JSON Schema: " + e.getClass().getSimpleName());
    }

    @Override
    public Object decode(byte[] value, int offset) {
        try {
            return DocumentReader.load(Arrays.copyOfRange(value, offset, value.length));
        } catch (EnvelopeException e) { // not JSON, not an object (Python's NotJsonObject is a NotJson)
            throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH,
                    "payload of " + where + " is not usable JSON: " + e.problem());
        }
    }

    /** The first error the validator reports, worded as {@code JsonSchemaFormat.validate} words it. */
    @Override
    public void validate(Object datum) {
        Set<ValidationMessage> errors = validator.validate(MAPPER.valueToTree(datum));
        Iterator<ValidationMessage> first = errors.iterator();
        if (first.hasNext()) {
            ValidationMessage error = first.next();
            throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH, "payload does not match " + where + " at "
                    + location(error.getInstanceLocation()) + ": " + error.getType() + " failed");
        }
    }

    /** {@code $} then {@code .name} per member and {@code [i]} per item, as the Python side prints a location. */
    private static String location(JsonNodePath path) {
        StringBuilder out = new StringBuilder("$");
        for (int i = 0; i < path.getNameCount(); i++) {
            Object element = path.getElement(i);
            out.append(element instanceof Integer index ? "[" + index + "]" : "." + element);
        }
        return out.toString();
    }

    @Override
    public byte[] encode(byte[] header, Object datum) {
        String text;
        try {
            text = PyJson.write(datum);
        } catch (InvalidJson e) {
            throw new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH,
                    "record cannot be written back as JSON: Out of range float values are not JSON compliant");
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(header.length + text.length() + 16);
        out.writeBytes(header);
        out.writeBytes(text.getBytes(StandardCharsets.UTF_8));
        return out.toByteArray();
    }

    @Override
    public List<Slot> slots(Object root, List<FieldTarget> targets) {
        return TargetWalk.slots(root, targets, NAVIGATOR);
    }

    /** The member of the object a field step walks into (null: not an object, or no such member). */
    @SuppressWarnings("unchecked")
    private static Slot memberSlot(Object node, FieldTarget.Step step, FieldTarget target) {
        if (node instanceof Map<?, ?> object && object.containsKey(step.name())) {
            return new TargetWalk.ValueSlot((Map<Object, Object>) object, step.name(), target);
        }
        return null;
    }

    /** A string as it is, an integer as its decimal text; null when absent or of another type. */
    @Override
    public String subject(Object root, String path) {
        Object node = root;
        for (String name : path.substring(2).split("\\.", -1)) {
            if (!(node instanceof Map<?, ?> object)) {
                return null;
            }
            node = object.get(name);
        }
        if (node instanceof String || node instanceof Long || node instanceof BigInteger) {
            return node.toString();
        }
        return null;
    }

    /** Python's name of a parsed JSON value's type ({@code type(value).__name__}). */
    @Override
    public String typeName(Object value) {
        if (value instanceof Boolean) {
            return "bool";
        }
        if (value instanceof Long || value instanceof BigInteger) {
            return "int";
        }
        if (value instanceof Double) {
            return "float";
        }
        return value instanceof Map<?, ?> ? "dict" : value instanceof List<?> ? "list" : "str";
    }
}
