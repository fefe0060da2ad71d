package pyprod.test.msk;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.Security;
import java.time.Instant;
import java.time.format.DateTimeFormatter;
import java.util.HexFormat;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.security.auth.callback.CallbackHandler;
import javax.security.sasl.SaslException;
import javax.security.sasl.SaslServer;
import javax.security.sasl.SaslServerFactory;
import org.apache.kafka.common.errors.SaslAuthenticationException;

/**
 * SASL/AWS_MSK_IAM on the broker (test only): parses the client's JSON, recomputes the SigV4
 * signature of the presigned "GET /" for kafka-cluster:Connect (host header signed) with the
 * secret key of MskIamLoginModule's options, and checks version, action, host, credential scope,
 * x-amz-date against x-amz-expires (and at most 5 minutes in the future) and the session token.
 * A refusal is a SaslAuthenticationException whose reason the client sees; success answers
 * {"version":"2020_10_22","request-id":...} as Amazon MSK does.
 */
public class MskIamSaslServer implements SaslServer {
    static final String MECHANISM = "AWS_MSK_IAM";
    static final String VERSION = "2020_10_22";
    static final String ALGORITHM = "AWS4-HMAC-SHA256";
    static final String SERVICE = "kafka-cluster";
    static final long MAX_FUTURE_S = 300;

    private boolean complete;
    private String authorizationId;

    @Override
    public String getMechanismName() {
        return MECHANISM;
    }

    @Override
    public byte[] evaluateResponse(byte[] response) throws SaslException {
        if (complete) {
            throw new SaslAuthenticationException("AWS_MSK_IAM: authentication already complete");
        }
        Map<String, ?> opts = MskIamLoginModule.options;
        Map<?, ?> msg;
        try {
            msg = new ObjectMapper().readValue(response, Map.class);
        } catch (Exception e) {
            throw refuse("the payload is not a JSON object");
        }
        String date = field(msg, "x-amz-date");
        check(VERSION.equals(msg.get("version")), "unsupported version");
        check((SERVICE + ":Connect").equals(msg.get("action")), "action is not kafka-cluster:Connect");
        check(opt(opts, "host", "127.0.0.1").equals(msg.get("host")), "host is not this broker's");
        check(ALGORITHM.equals(msg.get("x-amz-algorithm")), "unsupported algorithm");
        check("host".equals(msg.get("x-amz-signedheaders")), "signed headers must be host");
        String[] cred = field(msg, "x-amz-credential").split("/", -1);
        check(cred.length == 5 && cred[4].equals("aws4_request") && cred[3].equals(SERVICE),
              "malformed credential scope");
        check(cred[0].equals(opt(opts, "accessKey", "")), "unknown access key");
        check(cred[1].equals(date.substring(0, Math.min(8, date.length()))),
              "credential scope date is not x-amz-date's");
        check(cred[2].equals(opt(opts, "region", "")), "credential scope region is wrong");
        Instant signed;
        long expires;
        try {
            signed = Instant.from(DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmssX")
                                  .parse(date));
            expires = Long.parseLong(field(msg, "x-amz-expires"));
        } catch (RuntimeException e) {
            throw refuse("malformed x-amz-date or x-amz-expires");
        }
        check(expires > 0 && expires <= 900, "x-amz-expires out of range");
        long now = Instant.now().getEpochSecond();
        check(now <= signed.getEpochSecond() + expires, "the signature has expired");
        check(signed.getEpochSecond() <= now + MAX_FUTURE_S, "x-amz-date is in the future");
        Object token = msg.get("x-amz-security-token");
        Object wantToken = opts.get("sessionToken");
        check(token == null || token instanceof String, "malformed session token");
        check(wantToken == null ? token == null : wantToken.equals(token), "wrong session token");
        String expected = signature(msg, date, cred, (String) token, opt(opts, "secretKey", ""));
        check(MessageDigest.isEqual(expected.getBytes(StandardCharsets.US_ASCII),
                                    field(msg, "x-amz-signature").getBytes(StandardCharsets.UTF_8)),
              "the signature does not match");
        complete = true;
        authorizationId = cred[0];
        return ("{\"version\":\"" + VERSION + "\",\"request-id\":\"" + UUID.randomUUID() + "\"}")
                .getBytes(StandardCharsets.UTF_8);
    }

    /** SigV4 of the presigned GET / (query-string authentication), hex. */
    static String signature(Map<?, ?> msg, String date, String[] cred, String token,
                            String secret) throws SaslException {
        TreeMap<String, String> query = new TreeMap<>();
        query.put("Action", (String) msg.get("action"));
        query.put("X-Amz-Algorithm", ALGORITHM);
        query.put("X-Amz-Credential", String.join("/", cred));
        query.put("X-Amz-Date", date);
        query.put("X-Amz-Expires", (String) msg.get("x-amz-expires"));
        if (token != null) {
            query.put("X-Amz-Security-Token", token);
        }
        query.put("X-Amz-SignedHeaders", "host");
        StringBuilder qs = new StringBuilder();
        for (Map.Entry<String, String> e : query.entrySet()) {
            qs.append(qs.length() == 0 ? "" : "&").append(encode(e.getKey())).append('=')
              .append(encode(e.getValue()));
        }
        String canonical = String.join("\n", "GET", "/", qs, "host:" + msg.get("host"), "",
                                       "host", hex(sha256(new byte[0])));
        String scope = String.join("/", cred[1], cred[2], cred[3], cred[4]);
        String toSign = String.join("\n", ALGORITHM, date, scope,
                                    hex(sha256(canonical.getBytes(StandardCharsets.UTF_8))));
        byte[] key = ("AWS4" + secret).getBytes(StandardCharsets.UTF_8);
        for (String part : new String[] {cred[1], cred[2], cred[3], cred[4]}) {
            key = hmac(key, part);
        }
        return hex(hmac(key, toSign));
    }

    /** AWS's URI encoding: unreserved characters kept, every other UTF-8 byte as %XX. */
    static String encode(String s) {
        StringBuilder out = new StringBuilder();
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            char c = (char) (b & 0xff);
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                    || c == '-' || c == '_' || c == '.' || c == '~') {
                out.append(c);
            } else {
                out.append(String.format("%%%02X", b & 0xff));
            }
        }
        return out.toString();
    }

    static byte[] hmac(byte[] key, String msg) throws SaslException {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            return mac.doFinal(msg.getBytes(StandardCharsets.UTF_8));
        } catch (Exception e) {
            throw new SaslException("HmacSHA256 unavailable", e);
        }
    }

    static byte[] sha256(byte[] data) throws SaslException {
        try {
            return MessageDigest.getInstance("SHA-256").digest(data);
        } catch (Exception e) {
            throw new SaslException("SHA-256 unavailable", e);
        }
    }

    static String hex(byte[] b) {
        return HexFormat.of().formatHex(b);
    }

    private static String opt(Map<String, ?> opts, String key, String dflt) {
        Object v = opts.get(key);
        return v == null ? dflt : v.toString();
    }

    private static String field(Map<?, ?> msg, String key) {
        Object v = msg.get(key);
        if (!(v instanceof String)) {
            throw refuse("missing " + key);
        }
        return (String) v;
    }

    private static void check(boolean ok, String reason) {
        if (!ok) {
            throw refuse(reason);
        }
    }

    private static SaslAuthenticationException refuse(String reason) {
        return new SaslAuthenticationException("AWS_MSK_IAM authentication failed: " + reason);
    }

    @Override
    public boolean isComplete() {
        return complete;
    }

    @Override
    public String getAuthorizationID() {
        if (!complete) {
            throw new IllegalStateException("authentication not complete");
        }
        return authorizationId;
    }

    @Override
    public byte[] unwrap(byte[] incoming, int offset, int len) {
        throw new IllegalStateException("AWS_MSK_IAM has no security layer");
    }

    @Override
    public byte[] wrap(byte[] outgoing, int offset, int len) {
        throw new IllegalStateException("AWS_MSK_IAM has no security layer");
    }

    @Override
    public Object getNegotiatedProperty(String name) {
        return null;
    }

    @Override
    public void dispose() {
    }

    /** The factory Sasl.createSaslServer finds for "AWS_MSK_IAM". */
    public static class Factory implements SaslServerFactory {
        @Override
        public SaslServer createSaslServer(String mechanism, String protocol, String serverName,
                                           Map<String, ?> props, CallbackHandler cbh) {
            return MECHANISM.equals(mechanism) ? new MskIamSaslServer() : null;
        }

        @Override
        public String[] getMechanismNames(Map<String, ?> props) {
            return new String[] {MECHANISM};
        }
    }

    /** A security provider offering the factory (as Kafka's PlainSaslServerProvider). */
    public static class Provider extends java.security.Provider {
        private static final long serialVersionUID = 1L;

        protected Provider() {
            super("pyprod AWS_MSK_IAM test verifier", "1.0", "SASL/AWS_MSK_IAM server (test)");
            put("SaslServerFactory." + MECHANISM, Factory.class.getName());
        }

        public static synchronized void initialize() {
            if (Security.getProvider("pyprod AWS_MSK_IAM test verifier") == null) {
                Security.addProvider(new Provider());
            }
        }
    }
}
