package io.strongroom.dataplane.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.Hex;
import io.strongroom.dataplane.json.InvalidJson;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

/**
 * Test support shipped in the jar: proves the JVM codec against the Python one.
 *
 * <ul>
 *   <li>{@code vectors <dir>}: checks every frozen vector ({@link VectorCheck}); one {@code OK <name>} or
 *       {@code MISMATCH <name>: ...} line each; exit status 1 on any mismatch.</li>
 *   <li>{@code ops [shared]}: reads one {@link Operation} per line of stdin ({@code shared}: all of them through one
 *       codec), writes one result per line of stdout:
 *       {@code {"ok": true, "output_hex": ...}} or {@code {"ok": false, "kind": <Python error name>,
 *       "message": ...}}.</li>
 * </ul>
 */
public final class CodecTool {
    private static final ObjectMapper JSON = new ObjectMapper();

    private CodecTool() {
    }

    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (args.length == 2 && args[0].equals("vectors")) {
            System.exit(checkVectors(Path.of(args[1]), out));
        } else if (args.length == 1 && args[0].equals("ops")) {
            runOperations(out, null);
        } else if (args.length == 2 && args[0].equals("ops") && args[1].equals("shared")) {
            runOperations(out, new Operation.Shared());
        } else {
            System.err.println("usage: CodecTool vectors <dir> | CodecTool ops [shared] < operations.jsonl");
            System.exit(2);
        }
    }

    /** The {@code vectors} report as text (for a driver JVM called through py4j: {@code spark._jvm}). */
    public static String vectorReport(String dir) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8)) {
            checkVectors(Path.of(dir), out);
        }
        return buffer.toString(StandardCharsets.UTF_8);
    }

    static int checkVectors(Path dir, PrintStream out) throws IOException {
        List<Path> files;
        try (Stream<Path> listing = Files.list(dir)) {
            files = listing.filter(p -> p.toString().endsWith(".json")).sorted().toList();
        }
        int failures = files.isEmpty() ? 1 : 0;
        for (Path file : files) {
            String name = file.getFileName().toString().replaceFirst("\\.json$", "");
            List<String> mismatches;
            try {
                mismatches = new VectorCheck(JSON.readTree(file.toFile())).run();
            } catch (EnvelopeException e) {
                mismatches = List.of(e.kind().pythonName() + ": " + e.getMessage());
            } catch (RuntimeException | InvalidJson e) {
                mismatches = List.of(e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            failures += mismatches.isEmpty() ? 0 : 1;
            out.println(mismatches.isEmpty() ? "OK " + name : "MISMATCH " + name + ": " + String.join("; ", mismatches));
        }
        return failures == 0 ? 0 : 1;
    }

    static void runOperations(PrintStream out, Operation.Shared shared) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            out.println(JSON.writeValueAsString(result(JSON.readTree(line), shared)));
        }
    }

    private static ObjectNode result(JsonNode spec, Operation.Shared shared) {
        ObjectNode result = JSON.createObjectNode();
        try {
            byte[] output = new Operation(spec).run(shared);
            return result.put("ok", true).put("output_hex", Hex.of(output));
        } catch (EnvelopeException e) {
            return result.put("ok", false).put("kind", e.kind().pythonName()).put("message", e.getMessage());
        } catch (Operation.UnknownKey e) {
            return result.put("ok", false).put("kind", "UnknownKey").put("message", e.getMessage());
        }
    }
}
