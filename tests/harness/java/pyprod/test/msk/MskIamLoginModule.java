package pyprod.test.msk;

import java.util.Map;
import javax.security.auth.Subject;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.spi.LoginModule;

/**
 * The broker's JAAS login module for SASL/AWS_MSK_IAM (test only). Loading it registers the
 * SaslServerFactory (as Kafka's PlainLoginModule does); its options are the one identity the
 * verifier accepts: accessKey, secretKey, optional sessionToken, region, host (the broker host
 * name clients sign for).
 */
public class MskIamLoginModule implements LoginModule {
    static volatile Map<String, ?> options = Map.of();

    static {
        MskIamSaslServer.Provider.initialize();
    }

    @Override
    public void initialize(Subject subject, CallbackHandler handler, Map<String, ?> sharedState,
                           Map<String, ?> opts) {
        options = Map.copyOf(opts);
    }

    @Override
    public boolean login() {
        return true;
    }

    @Override
    public boolean logout() {
        return true;
    }

    @Override
    public boolean commit() {
        return true;
    }

    @Override
    public boolean abort() {
        return false;
    }
}
