package io.strongroom.dataplane.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.strongroom.dataplane.codec.AadProfile;
import io.strongroom.dataplane.codec.EnvelopeCodec;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.codec.KeyLookup;
import io.strongroom.dataplane.codec.KeyRef;
import io.strongroom.dataplane.codec.RecordContext;
import io.strongroom.dataplane.codec.RecordMarker;
import io.strongroom.dataplane.codec.SubjectKeyRef;
import io.strongroom.dataplane.codec.Utf8;
import io.strongroom.dataplane.codec.ValueMode;
import io.strongroom.dataplane.codec.WireIds;
import io.strongroom.dataplane.json.DocumentReader;
import io.strongroom.dataplane.json.FieldRules;
import io.strongroom.dataplane.json.JsonFieldCodec;
import io.strongroom.dataplane.json.OnErased;
import io.strongroom.dataplane.json.SealedFields;
import io.strongroom.dataplane.keys.ExecutorKeys;
import io.strongroom.dataplane.keys.KeyIdSubject;
import io.strongroom.dataplane.keys.KeyServiceClient;
import io.strongroom.dataplane.keys.KeyServiceException;
import io.strongroom.dataplane.schema.SchemaEngineException;
import io.strongroom.dataplane.schema.SchemaFieldCodec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Opens every whole value (or the rule's sealed JSON fields) of a chunk, as {@code DecryptRows} with {@code RuleCodec.open} in
 * {@code strongroom/spark/row_transforms.py} and {@code clients/sealing.py}: one key-service request per
 * chunk for every (key id, subject) the chunk's records were sealed under that this executor does not hold
 * ({@link ExecutorKeys}), then per record the same
 * outcomes (opened, passed through, erased, pending, failed) with the same reasons, routed by the same
 * policies (erased: drop or mark; failed: fail, dead-letter or skip; pending: the pending topic).
 */
final class DecryptRecords implements RecordTransform {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] PREFIX = {(byte) 0xF5, 0x01, 0x01, 0x01};
    private static final int KEY_ID = WireIds.SUBJECT_KEY_ID_SIZE;
    private static final int MIN_ENVELOPE = PREFIX.length + KEY_ID + 1 + 12 + WireIds.TAG_SIZE;
    static final String FAILED = "failed";
    static final String ERASED = "erased";
    static final String PENDING = "pending";
    /** The driver's state of a key it hands out. */
    private static final String AVAILABLE = "available";
    /** The key states of a packed {@code decrypt_keys} answer by code ({@code KEY_STATE_CODES} in Python). */
    private static final Map<Byte, String> STATES = Map.of((byte) 1, AVAILABLE, (byte) 2, ERASED, (byte) 3, PENDING,
            (byte) 4, "lost", (byte) 5, "foreign");

    private final SinkSettings settings;
    private final SinkSettings.DecryptPlan decrypt;
    private final KeyServiceClient service;
    private final EnvelopeCodec codec = EnvelopeCodec.withDrbg();
    private final JsonFieldCodec fieldCodec = new JsonFieldCodec(codec);
    /** The compiled field paths per source topic (field-mode rules only). */
    private final Map<String, FieldRules> fieldRules = new HashMap<>();
    /** Schema-mode rules: the tagged fields of schema-registry records (plans from the driver). */
    private final SchemaFieldCodec schemaCodec;

    DecryptRecords(SinkSettings settings, KeyServiceClient service) {
        this.settings = settings;
        this.decrypt = settings.decrypt();
        this.service = service;
        this.schemaCodec = SchemaFieldCodec.overKeyService(codec, service);
    }

    /** The driver's answer for one key: its state, the DEK when available, the reason when lost or foreign. */
    private record KeyState(String state, byte[] dek, String reason) {
    }

    /** Why a record is not opened: the reason (and whether it is a pending key, not a failure). */
    private static final class NotOpened extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final String outcome;

        NotOpened(String outcome, String reason) {
            super(reason, null, false, false);
            this.outcome = outcome;
        }
    }

    @Override
    public List<Verdict> apply(List<SourceRecord> records) {
        Map<KeyIdSubject, KeyState> states = keyStates(records);
        try {
            long now = System.currentTimeMillis();
            List<Verdict> verdicts = new ArrayList<>(records.size());
            for (SourceRecord record : records) {
                SinkSettings.TopicPlan plan = plan(record);
                Verdict verdict;
                try {
                    verdict = open(record, plan, states, now);
                } catch (SchemaEngineException | KeyServiceException e) {
                    throw e; // not about this record: the task stops with the problem
                } catch (RuntimeException e) {
                    verdict = Verdict.notWritten(record, plan.output(), FAILED, TaskWriter.unexpected(record, e),
                            true);
                }
                verdicts.add(verdict);
            }
            return verdicts;
        } finally {
            for (KeyState state : states.values()) {
                if (state.dek() != null) {
                    Arrays.fill(state.dek(), (byte) 0);
                }
            }
            codec.forgetKeys(); // its kept ciphers too: the next chunk's keys come with the erasures since
        }
    }

    private SinkSettings.TopicPlan plan(SourceRecord record) {
        return settings.planFor(record.topic());
    }

    /** A key the chunk needs and the driver never answered for: pending. */
    private static final KeyState NOT_ANSWERED = new KeyState(PENDING, null, null);

    /**
     * Every (key id, subject) the chunk needs, each once: an available key this executor holds
     * ({@link ExecutorKeys}), else the driver's answer. One request per chunk, always: its answer carries the
     * erasures since the last request, applied before any held key is used.
     */
    private Map<KeyIdSubject, KeyState> keyStates(List<SourceRecord> records) {
        Set<KeyIdSubject> pairs = new LinkedHashSet<>();
        for (SourceRecord record : records) {
            List<byte[]> keyIds = keyIds(record, plan(record));
            if (keyIds.isEmpty()) {
                continue;
            }
            Object subject = EncryptRecords.subjectOf(plan(record), record, schemaCodec);
            if (subject instanceof EncryptRecords.Subject s) {
                for (byte[] keyId : keyIds) { // every key the record needs, not only its first field's
                    pairs.add(new KeyIdSubject(keyId, s.text()));
                }
            }
        }
        Map<KeyIdSubject, KeyState> states = new HashMap<>(2 * pairs.size());
        if (pairs.isEmpty()) {
            return states;
        }
        ExecutorKeys held = service.keys();
        long now = System.nanoTime();
        askDriver(held.unopenable(pairs, now), states, held, now);
        List<KeyIdSubject> rest = new ArrayList<>(pairs.size());
        for (KeyIdSubject pair : pairs) {
            if (!states.containsKey(pair)) {
                rest.add(pair);
            }
        }
        Map<KeyIdSubject, byte[]> found = held.openKeys(rest, now);
        found.forEach((pair, dek) -> states.put(pair, new KeyState(AVAILABLE, dek, null)));
        if (found.size() < rest.size()) { // an erasure in the answer removed them: the driver decides again
            List<KeyIdSubject> missed = new ArrayList<>();
            for (KeyIdSubject pair : rest) {
                if (!found.containsKey(pair)) {
                    missed.add(pair);
                }
            }
            askDriver(missed, states, held, now);
        }
        return states;
    }

    /** The driver's answer for each pair of {@code ask}; available keys are kept in {@code held}. */
    private void askDriver(List<KeyIdSubject> ask, Map<KeyIdSubject, KeyState> states, ExecutorKeys held, long now) {
        ObjectNode args = JSON.createObjectNode();
        ArrayNode list = args.putArray("pairs");
        Base64.Encoder b64 = Base64.getEncoder();
        for (KeyIdSubject pair : ask) {
            list.addArray().add(b64.encodeToString(pair.keyId())).add(pair.subject());
        }
        args.put("packed", true);
        KeyServiceClient.Answer answer = service.exchange("decrypt_keys", args);
        JsonNode result = answer.result();
        Base64.Decoder unb64 = Base64.getDecoder();
        byte[] codes = unb64.decode(result.path("states").asText(""));
        byte[] deks = unb64.decode(result.path("deks").asText(""));
        JsonNode reasons = result.path("reasons");
        if (codes.length != ask.size()) {
            throw new IllegalStateException("the key service answered " + codes.length + " keys for " + ask.size()
                    + " asked");
        }
        try {
            int at = 0;
            for (int i = 0; i < codes.length; i++) {
                KeyIdSubject pair = ask.get(i);
                String state = STATES.get(codes[i]);
                if (state == null) {
                    throw new IllegalStateException("the key service answered an unknown key state " + codes[i]);
                }
                byte[] dek = null;
                if (AVAILABLE.equals(state)) {
                    if (at + WireIds.KEY_SIZE > deks.length) {
                        throw new IllegalStateException("the key service answered fewer keys than it said available");
                    }
                    dek = Arrays.copyOfRange(deks, at, at + WireIds.KEY_SIZE);
                    at += WireIds.KEY_SIZE;
                }
                JsonNode reason = reasons.get(Integer.toString(i));
                KeyState kept = new KeyState(state, dek, reason == null || reason.isNull() ? null : reason.asText());
                states.put(pair, kept);
                if (dek != null) {
                    held.keepOpen(pair, dek, answer.generation(), now);
                }
            }
            if (at != deks.length) {
                throw new IllegalStateException("the key service answered more keys than it said available");
            }
        } finally {
            Arrays.fill(deks, (byte) 0);
        }
    }

    /** Every subject key id a value was sealed under, without decrypting (empty: no envelope found). */
    private List<byte[]> keyIds(SourceRecord record, SinkSettings.TopicPlan plan) {
        byte[] value = record.value();
        if (value == null) {
            return List.of();
        }
        if (plan.schemaMode()) {
            return schemaKeyIds(record);
        }
        if (plan.fields().isEmpty()) {
            if (value.length < PREFIX.length + KEY_ID || !startsWithPrefix(value)) {
                return List.of();
            }
            return List.of(Arrays.copyOfRange(value, PREFIX.length, PREFIX.length + KEY_ID));
        }
        if (!DocumentReader.mayHoldEnvelopes(value)) {
            return List.of();
        }
        List<byte[]> ids = new ArrayList<>();
        try {
            for (KeyRef ref : SealedFields.keyRefs(value, rules(record, plan))) {
                if (ref instanceof SubjectKeyRef subjectRef) {
                    ids.add(subjectRef.keyId());
                }
            }
        } catch (EnvelopeException e) {
            return List.of(); // a document that cannot be read needs no key: opening it names the reason
        }
        return ids;
    }

    private List<byte[]> schemaKeyIds(SourceRecord record) {
        List<byte[]> ids = new ArrayList<>();
        try {
            for (KeyRef ref : schemaCodec.keyRefs(record.topic(), record.value())) {
                if (ref instanceof SubjectKeyRef subjectRef) {
                    ids.add(subjectRef.keyId());
                }
            }
        } catch (EnvelopeException e) {
            return List.of(); // a record that cannot be read needs no key: opening it names the reason
        }
        return ids;
    }

    private FieldRules rules(SourceRecord record, SinkSettings.TopicPlan plan) {
        return fieldRules.computeIfAbsent(record.topic(), t -> new FieldRules(plan.fields()));
    }

    private static boolean startsWithPrefix(byte[] value) {
        for (int i = 0; i < PREFIX.length; i++) {
            if (value[i] != PREFIX[i]) {
                return false;
            }
        }
        return true;
    }

    private Verdict open(SourceRecord record, SinkSettings.TopicPlan plan, Map<KeyIdSubject, KeyState> states,
            long now) {
        byte[] value = record.value();
        if (value == null) {
            return Verdict.written(record, plan.output(), null, withoutMarker(record.headers()), Verdict.PASSTHROUGH);
        }
        ValueMode marker;
        try {
            marker = marker(record.headers());
        } catch (EnvelopeException e) {
            return fail(record, plan, describe(e));
        }
        boolean schema = plan.schemaMode();
        boolean fields = !schema && !plan.fields().isEmpty();
        ValueMode mode = schema ? ValueMode.SCHEMA_FIELDS : fields ? ValueMode.JSON_FIELDS : ValueMode.WHOLE_VALUE;
        if (marker != mode) {
            if (marker != null) {
                return fail(record, plan, "record is marked " + marker.name().toLowerCase(java.util.Locale.ROOT)
                        .replace('_', '-') + " but the rule for this topic is mode '" + (schema ? "schema" : fields
                                ? "fields" : "value") + "'");
            }
            if (decrypt.encryptedOnly()) {
                return fail(record, plan, "record has no " + WireIds.RECORD_HEADER_NAME + " marker header; this "
                        + "reader accepts encrypted records only (a plaintext or downgraded record)");
            }
            boolean sealed;
            try {
                if (schema) {
                    sealed = schemaCodec.holdsEnvelopes(record.topic(), value);
                } else {
                    sealed = fields ? DocumentReader.mayHoldEnvelopes(value) && SealedFields.any(value,
                            rules(record, plan)) : value.length >= MIN_ENVELOPE && startsWithPrefix(value);
                }
            } catch (EnvelopeException e) {
                return fail(record, plan, describe(e));
            }
            if (!sealed) {
                return Verdict.written(record, plan.output(), value, withoutMarker(record.headers()),
                        Verdict.PASSTHROUGH);
            }
        }
        Object subject = subjectForOpening(plan, record);
        if (subject instanceof String reason) {
            return fail(record, plan, "cannot find the subject to decrypt with: " + reason);
        }
        EncryptRecords.Subject s = (EncryptRecords.Subject) subject;
        byte[] plain;
        try {
            RecordContext ctx = new RecordContext(plan.boundTopic(), s.bytes(), AadProfile.TOPIC);
            KeyLookup keys = ref -> dekFor(ref, s.text(), states);
            plain = schema ? schemaCodec.open(record.topic(), value, keys, ctx) : fields
                    ? fieldCodec.decrypt(value, keys, ctx, Map.of(), OnErased.NULL, rules(record, plan))
                    : codec.decryptValue(value, keys, ctx, Map.of());
        } catch (NotOpened e) {
            if (PENDING.equals(e.outcome)) {
                return pending(record, s.text(), now, plan);
            }
            return fail(record, plan, e.getMessage());
        } catch (EnvelopeException e) {
            if (e.kind() == ErrorKind.SUBJECT_ERASED) {
                return erased(record, plan);
            }
            return fail(record, plan, describe(e));
        }
        return Verdict.written(record, plan.output(), plain, withoutMarker(record.headers()), Verdict.OK);
    }

    /** The key of a record's envelope: the DEK, null when erased, or why the record cannot be opened. */
    private static byte[] dekFor(KeyRef ref, String subject, Map<KeyIdSubject, KeyState> states) {
        if (!(ref instanceof SubjectKeyRef subjectRef)) {
            throw new NotOpened(FAILED, "UnsupportedKeyRef: the record is sealed with " + ref + ", not a per-subject "
                    + "key; the decrypting consumer reads subject-key envelopes only");
        }
        KeyState state = states.getOrDefault(new KeyIdSubject(subjectRef.keyId(), subject), NOT_ANSWERED);
        String hex = io.strongroom.dataplane.codec.Hex.of(subjectRef.keyId());
        switch (state.state()) {
            case "erased":
                return null;
            case "lost":
                throw new NotOpened(FAILED, state.reason() != null ? state.reason()
                        : "subject key " + hex + " cannot be unwrapped");
            case "foreign":
                throw new NotOpened(FAILED, "ForeignKey: " + (state.reason() != null ? state.reason()
                        : "key " + hex + " belongs to another subject"));
            case AVAILABLE:
                if (state.dek() != null) {
                    return state.dek();
                }
                throw new NotOpened(PENDING, null);
            default:
                throw new NotOpened(PENDING, null);
        }
    }

    /** The subject as {@code RuleCodec.open} takes it: the key itself when the rule says so and it decodes. */
    private Object subjectForOpening(SinkSettings.TopicPlan plan, SourceRecord record) {
        byte[] key = record.key();
        if ("key".equals(plan.subjectSource()) && key != null && key.length > 0 && key.length <= plan.maxSubjectBytes()) {
            String text = Utf8.decodeOrNull(key);
            if (text != null) {
                return new EncryptRecords.Subject(text, key);
            }
        }
        return EncryptRecords.subjectOf(plan, record, schemaCodec);
    }

    private static ValueMode marker(List<SourceRecord.Header> headers) {
        for (SourceRecord.Header h : headers) {
            if (WireIds.RECORD_HEADER_NAME.equals(h.name())) {
                return RecordMarker.parse(h.value());
            }
        }
        return null;
    }

    private static List<SourceRecord.Header> withoutMarker(List<SourceRecord.Header> headers) {
        List<SourceRecord.Header> kept = new ArrayList<>(headers.size());
        for (SourceRecord.Header h : headers) {
            if (!WireIds.RECORD_HEADER_NAME.equals(h.name())) {
                kept.add(h);
            }
        }
        return kept;
    }

    private static String describe(EnvelopeException e) {
        return e.kind().pythonName() + ": " + e.problem();
    }

    private Verdict erased(SourceRecord record, SinkSettings.TopicPlan plan) {
        if (!"mark".equals(decrypt.erased())) {
            return Verdict.notWritten(record, plan.output(), ERASED, null, false);
        }
        List<SourceRecord.Header> headers = withoutMarker(record.headers());
        headers.add(new SourceRecord.Header("strongroom.erased", new byte[] {'1'}));
        return new Verdict(true, plan.output(), record.key(), null, headers, record.timestampMs(), ERASED, null,
                false);
    }

    private Verdict pending(SourceRecord record, String subject, long now, SinkSettings.TopicPlan plan) {
        List<SourceRecord.Header> headers = new ArrayList<>(record.headers());
        headers.add(new SourceRecord.Header("strongroom.pending.subject", PartitionTxn.utf8(subject)));
        headers.add(new SourceRecord.Header("strongroom.pending.source", PartitionTxn.utf8(record.source())));
        headers.add(new SourceRecord.Header("strongroom.pending.since", PartitionTxn.utf8(Long.toString(now))));
        headers.add(new SourceRecord.Header("strongroom.pending.timestamp",
                PartitionTxn.utf8(record.timestampMs() == null ? "" : record.timestampMs().toString())));
        headers.add(new SourceRecord.Header("strongroom.pending.rule", PartitionTxn.utf8(Integer.toString(plan.ruleIndex()))));
        return new Verdict(true, decrypt.pendingTopic(), record.key(), record.value(), headers, record.timestampMs(),
                PENDING, null, false);
    }

    private Verdict fail(SourceRecord record, SinkSettings.TopicPlan plan, String reason) {
        if ("dead-letter".equals(decrypt.onFailure()) && settings.deadLetterTopic() != null) {
            return DeadLetter.of(record, settings.deadLetterTopic(), FAILED, reason);
        }
        boolean stop = "fail".equals(decrypt.onFailure());
        return Verdict.notWritten(record, plan.output(), FAILED, reason, stop);
    }
}
