package io.strongroom.dataplane.keys;

/**
 * What an executor needs to call the driver's key service ({@code KeyService.client_spec()} in
 * {@code strongroom/spark/keyservice.py}): its address, the token (64 hex characters) and the PEM of the
 * certificate it generated, which the client pins. {@link #toString()} never shows the token.
 */
public record KeyServiceSpec(String host, int port, String token, String certificatePem) {
    public KeyServiceSpec {
        if (host == null || host.isEmpty() || port <= 0 || port > 0xFFFF) {
            throw new IllegalArgumentException("a key service address is a host and a port in 1-65535");
        }
        if (token == null || !token.matches("[0-9a-f]{64}")) {
            throw new IllegalArgumentException("a key service token is 64 lower-case hex characters");
        }
        if (certificatePem == null || !certificatePem.contains("BEGIN CERTIFICATE")) {
            throw new IllegalArgumentException("a key service spec carries the service's PEM certificate");
        }
    }

    @Override
    public String toString() {
        return "KeyServiceSpec[" + host + ":" + port + ", token=<hidden>]";
    }
}
