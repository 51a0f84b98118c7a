package estate;

import org.apache.dubbo.config.SslConfig;

/**
 * The peers' TLS options, as Dubbo 3.3's own SslConfig (dubbo.ssl.*): --tls-cert and --tls-key
 * (the provider's certificate, or the consumer's: Dubbo's consumer side enables TLS only when it
 * has a client certificate), --tls-ca (a provider: the CA its clients' certificates must chain
 * to, i.e. mutual TLS; a consumer: the CA it trusts providers by) and, for a consumer,
 * --tls-verify-host false (Netty 4.2's endpoint identification switched off by its own
 * system property, for lack of a Dubbo setting).
 */
final class Tls {
    private Tls() {}

    /** The SslConfig these options describe, or null when --tls-cert is not given. */
    static SslConfig of(Args args, boolean server) {
        String cert = args.get("tls-cert", "");
        if (cert.isEmpty()) {
            return null;
        }
        String key = args.require("tls-key");
        String ca = args.get("tls-ca", "");
        SslConfig ssl = new SslConfig();
        if (server) {
            ssl.setServerKeyCertChainPath(cert);
            ssl.setServerPrivateKeyPath(key);
            if (!ca.isEmpty()) ssl.setServerTrustCertCollectionPath(ca);
        } else {
            ssl.setClientKeyCertChainPath(cert);
            ssl.setClientPrivateKeyPath(key);
            if (!ca.isEmpty()) ssl.setClientTrustCertCollectionPath(ca);
            if (args.get("tls-verify-host", "true").equals("false")) {
                // Read once, when Netty's SslUtils loads: set before Dubbo builds any context.
                System.setProperty("io.netty.handler.ssl.defaultEndpointVerificationAlgorithm", "NONE");
            }
        }
        return ssl;
    }
}
