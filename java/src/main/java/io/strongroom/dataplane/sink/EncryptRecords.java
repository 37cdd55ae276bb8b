package io.strongroom.dataplane.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.strongroom.dataplane.codec.EnvelopeCodec;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.RecordContext;
import io.strongroom.dataplane.codec.RecordMarker;
import io.strongroom.dataplane.codec.SubjectKeyRef;
import io.strongroom.dataplane.codec.Utf8;
import io.strongroom.dataplane.codec.ValueMode;
import io.strongroom.dataplane.codec.WireIds;
import io.strongroom.dataplane.json.DocumentReader;
import io.strongroom.dataplane.json.FieldRules;
import io.strongroom.dataplane.json.JsonFieldCodec;
import io.strongroom.dataplane.json.PyFloat;
import io.strongroom.dataplane.keys.ExecutorKeys;
import io.strongroom.dataplane.keys.KeyServiceClient;
import io.strongroom.dataplane.keys.KeyServiceException;
import io.strongroom.dataplane.schema.SchemaEngineException;
import io.strongroom.dataplane.schema.SchemaFieldCodec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Seals every whole value (or the rule's JSON fields) of a chunk with its subject's key, as {@code EncryptRows} in
 * {@code strongroom/spark/row_transforms.py}: the same order of decisions and the same reasons (subject
 * missing, too large before or after sealing), one key-service request per chunk, the marker header
 * first. The chunk's keys are copies, overwritten after the chunk; the executor keeps its own in
 * {@link ExecutorKeys}.
 */
final class EncryptRecords implements RecordTransform {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final SourceRecord.Header VALUE_MARKER = new SourceRecord.Header(WireIds.RECORD_HEADER_NAME,
            RecordMarker.headerValue(ValueMode.WHOLE_VALUE));
    private static final SourceRecord.Header FIELDS_MARKER = new SourceRecord.Header(WireIds.RECORD_HEADER_NAME,
            RecordMarker.headerValue(ValueMode.JSON_FIELDS));
    private static final SourceRecord.Header SCHEMA_MARKER = new SourceRecord.Header(WireIds.RECORD_HEADER_NAME,
            RecordMarker.headerValue(ValueMode.SCHEMA_FIELDS));

    /**
     * Seals asked for a key at least, whatever the chunk needs: the rest serves the next chunks of this executor.
     * Charged to the key's usage limit when asked; unused when the executor ends, never used by anyone else.
     */
    static final int SEAL_ALLOWANCE = 1024;
    /** One key of a packed {@code encrypt_keys} answer: flag, key id, DEK ({@code strongroom/spark/keyservice.py}). */
    private static final int PACKED_KEY = 1 + WireIds.SUBJECT_KEY_ID_SIZE + WireIds.KEY_SIZE;

    private final SinkSettings settings;
    private final KeyServiceClient service;
    private final EnvelopeCodec codec = EnvelopeCodec.withDrbg();
    private final JsonFieldCodec fieldCodec = new JsonFieldCodec(codec);
    /** Schema-mode rules: the tagged fields of schema-registry records (plans from the driver). */
    private final SchemaFieldCodec schemaCodec;
    /** The compiled field paths per source topic (field-mode rules only). */
    private final Map<String, FieldRules> fieldRules = new HashMap<>();

    EncryptRecords(SinkSettings settings, KeyServiceClient service) {
        this.settings = settings;
        this.service = service;
        this.schemaCodec = SchemaFieldCodec.overKeyService(codec, service);
    }

    /** A subject key as the service handed it out for one chunk (null: the post-erasure policy drops it). */
    private record SubjectKey(SubjectKeyRef ref, byte[] dek) {
    }

    @Override
    public List<Verdict> apply(List<SourceRecord> records) {
        Object[] subjects = new Object[records.size()];
        // per source topic: its rule's KEK wraps the keys (a KEK per topic, strongroom/keys/router.py)
        Map<String, Map<String, Integer>> wanted = new HashMap<>();
        for (int i = 0; i < subjects.length; i++) {
            SourceRecord record = records.get(i);
            if (record.value() == null) {
                continue;
            }
            SinkSettings.TopicPlan plan = plan(record);
            Object subject = subjectOf(plan, record, schemaCodec);
            subjects[i] = subject;
            if (subject instanceof Subject s) {
                wanted.computeIfAbsent(record.topic(), t -> new HashMap<>(2 * subjects.length))
                        .merge(s.text(), sealCount(plan, record), Integer::sum);
            }
        }
        Map<String, Map<String, SubjectKey>> keys = new HashMap<>();
        try {
            wanted.forEach((topic, seals) -> keys.put(topic, keysFor(topic, seals)));
            List<Verdict> verdicts = new ArrayList<>(subjects.length);
            for (int i = 0; i < subjects.length; i++) {
                SourceRecord record = records.get(i);
                verdicts.add(verdict(record, subjects[i], keys.getOrDefault(record.topic(), Map.of())));
            }
            return verdicts;
        } finally {
            for (Map<String, SubjectKey> topicKeys : keys.values()) {
                for (SubjectKey key : topicKeys.values()) {
                    if (key != null) {
                        Arrays.fill(key.dek(), (byte) 0);
                    }
                }
            }
            codec.forgetKeys(); // its kept ciphers too: the next chunk's keys come with the erasures since
        }
    }

    /**
     * How many seals sealing the record makes, each under its own nonce: what it charges its key's usage limit
     * ({@code RuleCodec.seal_count} in {@code clients/sealing.py}). One for a whole value, one per selected value in
     * field and schema mode. A value that sealing rejects counts one.
     */
    private int sealCount(SinkSettings.TopicPlan plan, SourceRecord record) {
        try {
            if (plan.schemaMode()) {
                return schemaCodec.valueCount(record.topic(), record.value());
            }
            if (!plan.fields().isEmpty()) {
                return JsonFieldCodec.valueCount(record.value(), fieldRules.computeIfAbsent(record.topic(),
                        t -> new FieldRules(plan.fields())));
            }
            return 1;
        } catch (SchemaEngineException | KeyServiceException e) {
            throw e; // not about this record: the task stops with the problem
        } catch (RuntimeException e) {
            return 1; // sealing rejects the record (or stops on it) with the reason
        }
    }

    private SinkSettings.TopicPlan plan(SourceRecord record) {
        return settings.planFor(record.topic());
    }

    /** A record's subject: its text and UTF-8 bytes. */
    record Subject(String text, byte[] bytes) {
    }

    /**
     * The subject per the rule ({@code subject_of} in {@code clients/records.py}; {@code _schema_subject} in
     * {@code clients/sealing.py} for a field of a schema-registry record), or the reason there is none.
     */
    static Object subjectOf(SinkSettings.TopicPlan plan, SourceRecord record, SchemaFieldCodec schema) {
        byte[] raw = null;
        if ("json".equals(plan.subjectSource()) && plan.schemaMode()) {
            return schemaSubject(plan, record, schema);
        }
        if ("json".equals(plan.subjectSource())) {
            return jsonSubject(plan, record.value());
        }
        if ("key".equals(plan.subjectSource())) {
            raw = record.key();
        } else {
            for (SourceRecord.Header h : record.headers()) {
                if (plan.subjectHeader().equals(h.name())) {
                    raw = h.value();
                    break;
                }
            }
        }
        String where = plan.subjectWhere();
        if (raw == null || raw.length == 0) {
            return "no subject (" + where + " is missing or empty)";
        }
        return checked(plan, raw);
    }

    private static Object checked(SinkSettings.TopicPlan plan, byte[] raw) {
        String where = plan.subjectWhere();
        if (raw.length > plan.maxSubjectBytes()) {
            return "no subject (" + where + " is " + raw.length + " bytes, more than " + plan.maxSubjectBytes() + ")";
        }
        String text = Utf8.decodeOrNull(raw);
        return text == null ? "no subject (" + where + " is not UTF-8 text)" : new Subject(text, raw);
    }

    private static Object schemaSubject(SinkSettings.TopicPlan plan, SourceRecord record, SchemaFieldCodec schema) {
        String where = "field path " + plan.subjectPath();
        if (record.value() == null) {
            return "no subject (" + where + " is missing or empty)";
        }
        String text;
        try {
            text = schema.subject(record.topic(), record.value(), plan.subjectPath());
        } catch (EnvelopeException e) {
            return "no subject (" + where + " cannot be read: " + e.problem() + ")";
        }
        if (text == null || text.isEmpty()) {
            return "no subject (" + where + " is missing, empty or not a string or integer)";
        }
        byte[] raw = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        if (raw.length > plan.maxSubjectBytes()) {
            return "no subject (" + where + " is more than " + plan.maxSubjectBytes() + " bytes)";
        }
        return new Subject(text, raw);
    }

    /** The subject at the rule's dotted JSON path ({@code _json_subject} in {@code clients/records.py}). */
    private static Object jsonSubject(SinkSettings.TopicPlan plan, byte[] value) {
        String where = plan.subjectWhere();
        String missing = "no subject (" + where + " is missing or empty)";
        if (value == null) {
            return missing;
        }
        Object node;
        try {
            node = DocumentReader.load(value);
        } catch (EnvelopeException e) {
            return "no subject (" + where + " is missing: the value is not a JSON object)";
        }
        for (String step : plan.subjectPath().substring(2).split("\\.", -1)) {
            if (!(node instanceof Map<?, ?> object) || !object.containsKey(step)) {
                return missing;
            }
            node = object.get(step);
        }
        String text;
        if (node instanceof String string) {
            text = string;
        } else if (node instanceof Boolean bool) {
            text = bool ? "true" : "false";
        } else if (node instanceof Double number) {
            text = PyFloat.javaDoubleText(number); // java_double_text in Python: the same on every JVM
        } else if (node instanceof Number number) {
            text = number.toString();
        } else {
            String kind = node == null ? "null" : node instanceof Map<?, ?> ? "dict" : "list";
            return "no subject (" + where + " is a JSON " + kind + ", not a string or number)";
        }
        if (text.isEmpty()) {
            return missing;
        }
        if (Utf8.hasLoneSurrogate(text)) {
            return "no subject (" + where + " is not valid Unicode text)";
        }
        return checked(plan, text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    /**
     * Keys for the chunk's subjects of one source topic; {@code seals} (records per subject) is charged to the keys'
     * usage limits. One request per chunk and topic, always, for what this executor's keys cannot serve: its
     * answer carries the erasures since the last request, applied before any held key is used. A key from the
     * driver comes with {@link #SEAL_ALLOWANCE} seals at least; what the chunk does not use stays with the
     * executor's keys for the next chunks.
     */
    private Map<String, SubjectKey> keysFor(String topic, Map<String, Integer> seals) {
        ExecutorKeys held = service.keys();
        Map<String, SubjectKey> keys = new HashMap<>(2 * seals.size());
        long now = System.nanoTime();
        askDriver(topic, held.unservable(topic, seals, now), keys, held, now);
        Map<String, Integer> rest = new HashMap<>(2 * seals.size());
        seals.forEach((subject, count) -> {
            if (!keys.containsKey(subject)) {
                rest.put(subject, count);
            }
        });
        Map<String, ExecutorKeys.Key> taken = held.takeSeals(topic, rest, now);
        taken.forEach((subject, key) -> keys.put(subject, new SubjectKey(new SubjectKeyRef(key.keyId()), key.dek())));
        if (taken.size() < rest.size()) { // an erasure in the answer removed them, or another task took their seals
            Map<String, Integer> missed = new LinkedHashMap<>();
            rest.forEach((subject, count) -> {
                if (!taken.containsKey(subject)) {
                    missed.put(subject, count);
                }
            });
            askDriver(topic, missed, keys, held, now);
        }
        return keys;
    }

    /**
     * Ask the driver for {@code ask}'s keys, each with an allowance of seals; what the chunk does not use is kept
     * in {@code held}.
     */
    private void askDriver(String topic, Map<String, Integer> ask, Map<String, SubjectKey> keys, ExecutorKeys held,
            long now) {
        ObjectNode args = JSON.createObjectNode();
        args.put("topic", topic);
        ArrayNode list = args.putArray("subjects");
        ArrayNode counts = args.putArray("seals");
        ask.forEach((subject, count) -> {
            list.add(subject);
            counts.add(Math.max(count, SEAL_ALLOWANCE));
        });
        args.put("packed", true);
        KeyServiceClient.Answer answer = service.exchange("encrypt_keys", args);
        byte[] packed = Base64.getDecoder().decode(answer.result().path("keys").asText(""));
        if (packed.length != PACKED_KEY * ask.size()) {
            throw new IllegalStateException("the key service answered " + packed.length + " bytes of keys for "
                    + ask.size() + " subjects");
        }
        try {
            int at = 0;
            for (Map.Entry<String, Integer> wanted : ask.entrySet()) {
                String subject = wanted.getKey();
                if (packed[at] == 0) { // the post-erasure policy drops the subject's records
                    keys.put(subject, null);
                } else {
                    byte[] keyId = Arrays.copyOfRange(packed, at + 1, at + 1 + WireIds.SUBJECT_KEY_ID_SIZE);
                    byte[] dek = Arrays.copyOfRange(packed, at + 1 + WireIds.SUBJECT_KEY_ID_SIZE, at + PACKED_KEY);
                    keys.put(subject, new SubjectKey(new SubjectKeyRef(keyId), dek));
                    int count = wanted.getValue();
                    held.keepSeals(topic, subject, keyId, dek, Math.max(count, SEAL_ALLOWANCE) - count,
                            answer.generation(), now);
                }
                at += PACKED_KEY;
            }
        } finally {
            Arrays.fill(packed, (byte) 0);
        }
    }

    private Verdict verdict(SourceRecord record, Object subject, Map<String, SubjectKey> keys) {
        SinkSettings.TopicPlan plan = plan(record);
        String out = plan.output();
        if (record.value() == null) {
            return Verdict.written(record, out, null, record.headers(), Verdict.PASSTHROUGH);
        }
        if (subject instanceof String reason) {
            return reject(record, plan, reason);
        }
        Subject s = (Subject) subject;
        SubjectKey key = keys.get(s.text());
        if (key == null) {
            return Verdict.notWritten(record, out, Verdict.DROPPED, null, false);
        }
        int limit = settings.limitFor(out);
        if (record.value().length > limit) {
            return reject(record, plan, "value too large to encrypt (> " + limit + " bytes)");
        }
        boolean fields = !plan.fields().isEmpty() && !plan.schemaMode();
        byte[] sealed;
        try {
            RecordContext ctx = new RecordContext(out, s.bytes(), plan.profile());
            if (plan.schemaMode()) {
                sealed = schemaCodec.seal(record.topic(), record.value(), key.dek(), key.ref(), ctx);
            } else if (fields) {
                sealed = fieldCodec.encrypt(record.value(), fieldRules.computeIfAbsent(record.topic(),
                        t -> new FieldRules(plan.fields())), key.dek(), key.ref(), ctx);
            } else {
                sealed = codec.seal(record.value(), key.dek(), key.ref(), ctx, "");
            }
        } catch (EnvelopeException e) {
            return reject(record, plan, e.problem() + (plan.schemaMode() ? " (schema mode)" : fields ? " (field mode)"
                    : ""));
        } catch (SchemaEngineException | KeyServiceException e) {
            throw e; // not about this record: the task stops with the problem
        } catch (RuntimeException e) {
            return Verdict.notWritten(record, out, Verdict.REJECTED, TaskWriter.unexpected(record, e), true);
        }
        if (sealed.length > limit) {
            return reject(record, plan, "encrypted value would be " + sealed.length
                    + " bytes, above the output topic's limit of " + limit + " bytes");
        }
        List<SourceRecord.Header> headers = new ArrayList<>(record.headers().size() + 1);
        headers.add(plan.schemaMode() ? SCHEMA_MARKER : fields ? FIELDS_MARKER : VALUE_MARKER);
        for (SourceRecord.Header h : record.headers()) {
            if (!WireIds.RECORD_HEADER_NAME.equals(h.name())) {
                headers.add(h);
            }
        }
        return Verdict.written(record, out, sealed, headers, Verdict.OK);
    }

    /** Dead-letter the record unchanged with the reason, or stop (the rule's on_reject). */
    private Verdict reject(SourceRecord record, SinkSettings.TopicPlan plan, String reason) {
        if (plan.deadLetter() && settings.deadLetterTopic() != null) {
            return DeadLetter.of(record, settings.deadLetterTopic(), Verdict.REJECTED, reason);
        }
        return Verdict.notWritten(record, plan.output(), Verdict.REJECTED, reason, true);
    }
}
