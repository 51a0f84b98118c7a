package estate;

import java.lang.reflect.Field;
import org.apache.dubbo.common.utils.NetUtils;

/**
 * Keeps a test peer's Dubbo traffic on 127.0.0.1.
 *
 * <p>Dubbo 3.3 treats every 127.* address as "invalid": a provider asked to register 127.0.0.1
 * registers the machine's first network address instead (ServiceConfig.findConfiguredHosts), and
 * a consumer given a 127.0.0.1 provider dials that address too (AbstractClient.getConnectAddress
 * through NetUtils.filterLocalHost). Both read the machine's address from NetUtils.getLocalHost(),
 * which caches it in a private field; setting that field before Dubbo starts makes "the machine's
 * address" 127.0.0.1 for this process, so the suite's calls never leave loopback. Test code only:
 * no production setting of Dubbo does this.
 */
final class Loopback {
    private Loopback() {}

    static void pin() {
        try {
            Field cached = NetUtils.class.getDeclaredField("HOST_ADDRESS");
            cached.setAccessible(true);
            cached.set(null, "127.0.0.1");
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot pin Dubbo's local host to 127.0.0.1", e);
        }
        if (!"127.0.0.1".equals(NetUtils.getLocalHost())) {
            throw new IllegalStateException("Dubbo's local host is " + NetUtils.getLocalHost());
        }
    }
}
