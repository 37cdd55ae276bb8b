package io.strongroom.dataplane.keys;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS to the key service trusting exactly one certificate, the one the service generated (as the Python
 * client's {@code load_verify_locations(cadata=cert)}): TLS 1.2 or 1.3, the host name or IP checked against
 * the certificate's subject alternative name, no system trust store.
 */
final class PinnedTls {
    private static final String[] PROTOCOLS = {"TLSv1.3", "TLSv1.2"};

    private final SSLContext context;

    PinnedTls(String certificatePem) {
        try {
            Certificate pinned = CertificateFactory.getInstance("X.509")
                    .generateCertificate(new ByteArrayInputStream(certificatePem.getBytes(StandardCharsets.US_ASCII)));
            KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
            trusted.load(null, null);
            trusted.setCertificateEntry("strongroom-key-service", pinned);
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            trust.init(trusted);
            this.context = SSLContext.getInstance("TLS");
            context.init(null, trust.getTrustManagers(), null);
        } catch (GeneralSecurityException | IOException e) {
            throw new KeyServiceException("the key service certificate cannot be pinned: " + e.getClass().getSimpleName(),
                    "the task must carry the PEM certificate the driver's key service generated");
        }
    }

    /** A connected socket, its handshake done and the server's certificate and name verified. */
    SSLSocket connect(String host, int port, int connectTimeoutMillis) throws IOException {
        SSLSocket socket = (SSLSocket) context.getSocketFactory().createSocket();
        socket.connect(new InetSocketAddress(host, port), connectTimeoutMillis);
        SSLParameters parameters = socket.getSSLParameters();
        parameters.setProtocols(PROTOCOLS);
        parameters.setEndpointIdentificationAlgorithm("HTTPS");
        socket.setSSLParameters(parameters);
        socket.startHandshake();
        return socket;
    }
}
