package io.strongroom.dataplane.keys;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.SSLSocket;

/**
 * The executor side of the driver's key service, speaking the protocol of
 * {@code strongroom/spark/keyservice.py}: pinned TLS, the token in the first frame, then JSON request
 * frames {@code {"op", "args"}} answered by {@code {"ok": true, "result"}} or
 * {@code {"ok": false, "error": {"problem", "hint"}}}. One connection, one request at a time; a
 * connection the driver closed is reopened once (as the Python client does).
 *
 * <p>Every request names the erasure generation this executor has seen; the answer's erasures are applied to
 * {@link ExecutorKeys} before the answer is returned, as {@code KeyServiceClient.call} does in Python.
 */
public final class KeyServiceClient implements AutoCloseable {
    /** Largest response frame accepted (keys for every subject of a batch), as in Python. */
    static final long MAX_RESPONSE_FRAME = 256L * 1024 * 1024;
    static final long MAX_AUTH_RESPONSE = 1024;
    private static final int CONNECT_TIMEOUT_MILLIS = 30_000;
    /**
     * Field names not canonicalized: an answer's object names are the chunk's subjects, each met once, which Jackson
     * would otherwise intern into its symbol table one by one.
     */
    private static final ObjectMapper JSON = new ObjectMapper(
            JsonFactory.builder().disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES).build());
    private static final String REACH_HINT = "executors must reach the driver host (as for Spark's own driver endpoints)";

    private final KeyServiceSpec spec;
    private final PinnedTls tls;
    private final int readTimeoutMillis;
    private final ExecutorKeys keys;
    private Connection connection;

    /** An answer and the erasure generation it was given at ({@link ExecutorKeys#UNKNOWN}: none reported). */
    public record Answer(JsonNode result, long generation) {
    }

    /** An open, authenticated connection. */
    private record Connection(SSLSocket socket, DataInputStream in, DataOutputStream out) {
    }

    public KeyServiceClient(KeyServiceSpec spec, int readTimeoutMillis) {
        this.spec = spec;
        this.tls = new PinnedTls(spec.certificatePem());
        this.readTimeoutMillis = readTimeoutMillis;
        this.keys = ExecutorKeys.of(spec);
    }

    /** The keys this executor holds from this client's service. */
    public ExecutorKeys keys() {
        return keys;
    }

    /** Send one request; the result, or a {@link KeyServiceException} with the service's problem and hint. */
    public JsonNode call(String op, ObjectNode args) {
        return exchange(op, args).result();
    }

    /** {@link #call}, with the erasure generation of the answer (its erasures already applied to {@link #keys}). */
    public synchronized Answer exchange(String op, ObjectNode args) {
        ObjectNode request = JSON.createObjectNode().put("op", op);
        request.set("args", args);
        long generation = keys.generation();
        if (generation == ExecutorKeys.UNKNOWN) {
            request.putNull("erasure_generation");
        } else {
            request.put("erasure_generation", generation);
        }
        JsonNode response = null;
        for (int attempt = 1; response == null; attempt++) {
            try {
                Connection open = connection();
                Frames.write(open.out(), JSON.writeValueAsBytes(request));
                response = JSON.readTree(Frames.read(open.in(), MAX_RESPONSE_FRAME));
            } catch (IOException e) {
                close();
                if (attempt == 2) {
                    throw new KeyServiceException("cannot reach the driver's key service at " + spec.host() + ":"
                            + spec.port() + ": " + describe(e), REACH_HINT);
                }
            }
        }
        JsonNode result = resultOf(response);
        return new Answer(result, followErasures(response.path("erasures")));
    }

    /** Apply an answer's {@code erasures} to this executor's keys; the answer's generation. */
    private long followErasures(JsonNode erasures) {
        if (!erasures.isObject() || !erasures.path("generation").canConvertToLong()) {
            return ExecutorKeys.UNKNOWN;
        }
        long generation = erasures.get("generation").asLong();
        List<byte[]> erased = new ArrayList<>();
        for (JsonNode id : erasures.path("key_ids")) {
            erased.add(Base64.getDecoder().decode(id.asText()));
        }
        keys.follow(generation, erased, erasures.path("reset").asBoolean(false));
        return generation;
    }

    private static String describe(IOException e) {
        String name = e.getClass().getSimpleName();
        return e.getMessage() == null ? name : name + ": " + e.getMessage();
    }

    private static JsonNode resultOf(JsonNode response) {
        if (!response.path("ok").asBoolean(false)) {
            JsonNode error = response.path("error");
            String hint = error.path("hint").asText("");
            throw new KeyServiceException(error.path("problem").asText("the key service refused the request"),
                    hint.isEmpty() ? "see the driver log" : hint);
        }
        return response.path("result");
    }

    private Connection connection() throws IOException {
        if (connection != null) {
            return connection;
        }
        SSLSocket socket = tls.connect(spec.host(), spec.port(), CONNECT_TIMEOUT_MILLIS);
        try {
            socket.setSoTimeout(readTimeoutMillis);
            DataInputStream in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
            Frames.write(out, spec.token().getBytes(StandardCharsets.US_ASCII));
            resultOf(JSON.readTree(Frames.read(in, MAX_AUTH_RESPONSE)));
            connection = new Connection(socket, in, out);
            return connection;
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    @Override
    public synchronized void close() {
        if (connection != null) {
            try {
                connection.socket().close();
            } catch (IOException e) {
                // closing a dead connection: nothing left to release
            } finally {
                connection = null;
            }
        }
    }
}
