package io.strongroom.dataplane.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.strongroom.dataplane.keys.KeyServiceClient;
import io.strongroom.dataplane.keys.KeyServiceException;
import io.strongroom.dataplane.keys.KeyServiceSpec;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * Test support: calls a running key service with the Java client. Reads one JSON document from stdin
 * (never the command line, where the token would be visible to other users):
 * {@code {"spec": {"host", "port", "token", "cert"}, "requests": [{"op", "args", "pause_ms"}], "read_timeout_ms"}} and
 * prints one line per request: {@code {"ok": true, "result"}} or {@code {"ok": false, "problem", "hint"}}.
 */
public final class KeyServiceTool {
    private static final ObjectMapper JSON = new ObjectMapper();

    private KeyServiceTool() {
    }

    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        JsonNode input = JSON.readTree(System.in);
        JsonNode spec = input.path("spec");
        KeyServiceSpec service = new KeyServiceSpec(spec.path("host").asText(), spec.path("port").asInt(),
                spec.path("token").asText(), spec.path("cert").asText());
        try (KeyServiceClient client = new KeyServiceClient(service, input.path("read_timeout_ms").asInt(60_000))) {
            for (JsonNode request : input.path("requests")) {
                pause(request.path("pause_ms").asLong(0));
                out.println(JSON.writeValueAsString(call(client, request)));
            }
        }
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static ObjectNode call(KeyServiceClient client, JsonNode request) {
        ObjectNode line = JSON.createObjectNode();
        try {
            JsonNode args = request.path("args");
            line.put("ok", true).set("result", client.call(request.path("op").asText(),
                    args.isObject() ? (ObjectNode) args : JSON.createObjectNode()));
        } catch (KeyServiceException e) {
            line.put("ok", false).put("problem", e.problem()).put("hint", e.hint());
        }
        return line;
    }
}
