package io.strongroom.dataplane.schema;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Where a schema id's plan comes from: the driver's answer to {@code schema_plan} for a source topic (see
 * {@code strongroom/spark/schema_plans.py}): the executors ask the key service; the codec tests hand one in.
 */
@FunctionalInterface
public interface PlanSource {
    JsonNode plan(String topic, int schemaId);
}
