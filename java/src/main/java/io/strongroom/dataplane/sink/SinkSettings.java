package io.strongroom.dataplane.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.strongroom.dataplane.codec.AadProfile;
import io.strongroom.dataplane.keys.KeyServiceSpec;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;

/**
 * What one exactly-once write does, as the driver's Python side decides it (a JSON document built by
 * {@code strongroom.spark.jvm_sink}): where to write and as whom, the key service to ask, and per source
 * topic the rule's decisions already resolved to plain values (output topic, subject source, the texts
 * of the rejection reasons). It holds no key: keys come from the key service only.
 */
public record SinkSettings(
        String kind,
        String bootstrapServers,
        Map<String, String> clientProperties,
        String groupId,
        String transactionalIdPrefix,
        int transactionTimeoutMs,
        KeyServiceSpec service,
        String deadLetterTopic,
        int defaultLimit,
        Map<String, Integer> limits,
        Map<String, TopicPlan> topics,
        int chunkRows,
        DecryptPlan decrypt) {

    /** The plan of a source topic; a topic the driver did not plan for is a bug, never a record's fault. */
    TopicPlan planFor(String topic) {
        TopicPlan plan = topics.get(topic);
        if (plan == null) {
            throw new IllegalStateException("no rule was resolved for source topic " + topic
                    + " (the topic appeared after the batch was planned)");
        }
        return plan;
    }

    /**
     * How the records of one source topic are sealed or opened: the output topic, where the subject is,
     * the AAD profile and on_reject (encrypt), the topic the ciphertext is bound to and the rule's index
     * (decrypt).
     */
    public record TopicPlan(String output, String subjectSource, String subjectHeader, String subjectWhere,
            int maxSubjectBytes, AadProfile profile, boolean deadLetter, String boundTopic, int ruleIndex,
            List<String> fields, String subjectPath, String mode) {
        /** A schema-aware rule (the tagged fields of schema-registry records). */
        public boolean schemaMode() {
            return "schema".equals(mode);
        }
    }

    /** The decrypt pipeline's policies: on_failure (fail, dead-letter, skip), erased (drop, mark), the pending
     * topic, and whether records without the marker are refused. */
    public record DecryptPlan(String onFailure, String erased, String pendingTopic, boolean encryptedOnly) {
    }

    private static final ObjectMapper JSON = new ObjectMapper();
    /**
     * The clients' first back-off after a retriable error, unless the user's properties set one. A new transactional
     * id meets the coordinator's retriable answers (its transaction state still settling) in
     * {@code initTransactions}, {@code sendOffsetsToTransaction} and the committed-offset read; with Kafka's 100 ms
     * each of those took 100-230 ms, with 10 ms 20-70 ms (docs/benchmarks.md). Further retries still back off
     * exponentially up to {@code retry.backoff.max.ms} (1 s), so an outage is not hammered.
     */
    static final int FIRST_RETRY_BACKOFF_MS = 10;

    /** The settings of a write, from the JSON the driver built. */
    public static SinkSettings parse(String json) {
        JsonNode root;
        try {
            root = JSON.readTree(json);
        } catch (IOException e) {
            throw new IllegalArgumentException("the JVM sink's settings are not JSON (a strongroom bug)", e);
        }
        Map<String, String> props = new HashMap<>();
        root.path("client_properties").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        JsonNode svc = root.path("service");
        KeyServiceSpec spec = svc.isMissingNode() || svc.isNull() ? null
                : new KeyServiceSpec(svc.path("host").asText(), svc.path("port").asInt(), svc.path("token").asText(),
                        svc.path("cert").asText());
        Map<String, Integer> limits = new HashMap<>();
        root.path("limits").fields().forEachRemaining(e -> limits.put(e.getKey(), e.getValue().asInt()));
        Map<String, TopicPlan> topics = new HashMap<>();
        root.path("topics").fields().forEachRemaining(e -> {
            JsonNode t = e.getValue();
            topics.put(e.getKey(), new TopicPlan(t.path("output").asText(), t.path("subject_source").asText(),
                    t.path("subject_header").asText(""), t.path("subject_where").asText(),
                    t.path("max_subject_bytes").asInt(), "portable".equals(t.path("profile").asText())
                            ? AadProfile.PORTABLE : AadProfile.TOPIC,
                    t.path("dead_letter").asBoolean(false), t.path("bound_topic").asText(e.getKey()),
                    t.path("rule_index").asInt(0), texts(t.path("fields")),
                    t.path("subject_path").asText(""), t.path("mode").asText("value")));
        });
        JsonNode d = root.path("decrypt");
        DecryptPlan decrypt = d.isMissingNode() || d.isNull() ? null
                : new DecryptPlan(d.path("on_failure").asText("fail"), d.path("erased").asText("drop"),
                        d.path("pending_topic").asText(), d.path("encrypted_only").asBoolean(true));
        String dlq = root.path("dead_letter_topic").asText("");
        return new SinkSettings(root.path("kind").asText(), root.path("bootstrap_servers").asText(), props,
                root.path("group_id").asText(), root.path("transactional_id_prefix").asText(),
                root.path("transaction_timeout_ms").asInt(600_000), spec, dlq.isEmpty() ? null : dlq,
                root.path("default_limit").asInt(1_000_000 - 1024), limits, topics,
                root.path("chunk_rows").asInt(50_000), decrypt);
    }

    /** Never the client properties (they may hold credentials) nor the service's token. */
    @Override
    public String toString() {
        return "SinkSettings[" + kind + " as " + groupId + " to " + bootstrapServers + ", " + topics.size() + " topics]";
    }

    private static List<String> texts(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(node -> out.add(node.asText()));
        return List.copyOf(out);
    }

    public String transactionalId(String topic, int partition) {
        return transactionalIdPrefix + topic + "-" + partition;
    }

    public int limitFor(String outputTopic) {
        return limits.getOrDefault(outputTopic, defaultLimit);
    }

    /** The user's client properties the Java client knows (librdkafka-only ones are left out). */
    Map<String, Object> clientConfig(Set<String> known) {
        Map<String, Object> conf = new HashMap<>();
        clientProperties.forEach((key, value) -> {
            if (known.contains(key)) {
                conf.put(key, value);
            }
        });
        conf.put("bootstrap.servers", bootstrapServers);
        return conf;
    }

    Map<String, Object> producerConfig(String topic, int partition) {
        Map<String, Object> conf = clientConfig(ProducerConfig.configNames());
        conf.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId(topic, partition));
        conf.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, transactionTimeoutMs);
        conf.put(ProducerConfig.ACKS_CONFIG, "all");
        conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        conf.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        conf.put(ProducerConfig.LINGER_MS_CONFIG, 10);
        conf.put(ProducerConfig.BATCH_SIZE_CONFIG, 1_000_000);
        conf.put(ProducerConfig.BUFFER_MEMORY_CONFIG, 64L * 1024 * 1024);
        conf.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 60_000);
        conf.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 300_000);
        conf.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 120_000);
        conf.putIfAbsent(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, FIRST_RETRY_BACKOFF_MS);
        conf.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.ByteArraySerializer");
        conf.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                "org.apache.kafka.common.serialization.ByteArraySerializer");
        return conf;
    }

    Map<String, Object> consumerConfig() {
        Map<String, Object> conf = clientConfig(ConsumerConfig.configNames());
        conf.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        conf.putIfAbsent(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, FIRST_RETRY_BACKOFF_MS);
        // read_committed makes the committed-offset fetch wait for pending transactional offsets (require_stable)
        conf.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        conf.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        conf.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        return conf;
    }
}
