package dubbopy.nacos;

import com.alibaba.nacos.NacosServerBasicApplication;
import com.alibaba.nacos.NacosServerWebApplication;
import com.alibaba.nacos.core.listener.startup.NacosStartUp;
import com.alibaba.nacos.core.listener.startup.NacosStartUpManager;
import com.alibaba.nacos.sys.env.DeploymentType;
import com.alibaba.nacos.sys.env.EnvUtil;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Starts one standalone Nacos server (naming + config, no console) for a test session.
 *
 * <p>Arguments: HOME PORT [auth]. HOME holds Derby's data and the logs; PORT is the HTTP port
 * and PORT+1000 the gRPC port Nacos 2.x/3.x clients use. With "auth", Nacos's auth plugin is on
 * for clients and the admin API alike (nacos.core.auth.enabled, nacos.core.auth.admin.enabled),
 * and no user exists until the administrator's password is set (POST /nacos/v3/auth/user/admin).
 * Prints "READY PORT" once both listen.
 */
public final class NacosLauncher {
    private NacosLauncher() {}

    public static void main(String[] args) {
        String home = args[0];
        String port = args[1];
        boolean auth = args.length > 2 && "auth".equals(args[2]);
        System.setProperty("nacos.standalone", "true");
        System.setProperty("nacos.home", home);
        // Nacos's logback config writes under ${nacos.logs.path} (default ~/nacos/logs): keep a
        // test server's logs with its data, not in the user's home.
        System.setProperty("nacos.logs.path", home + "/logs");
        System.setProperty("JM.LOG.PATH", home + "/logs");
        // Derby writes derby.log into the working directory (the checkout) unless told otherwise.
        System.setProperty("derby.stream.error.file", home + "/derby.log");
        System.setProperty("nacos.server.main.port", port);
        System.setProperty("server.address", "127.0.0.1");
        System.setProperty("nacos.inetutils.ip-address", "127.0.0.1");
        System.setProperty("nacos.server.ip", "127.0.0.1");
        System.setProperty("nacos.deployment.type", "server");
        // Auth off unless asked for; the secret key (a Base64 key of at least 32 bytes, which
        // signs the JWT access tokens) and the server identity (what one server sends another)
        // are required by the auth plugin either way.
        System.setProperty("nacos.core.auth.enabled", String.valueOf(auth));
        System.setProperty("nacos.core.auth.admin.enabled", String.valueOf(auth));
        // Users, roles and permissions read from Derby at each check, not from a cache the
        // server reloads every 15 s: a test creates a user and logs in as it at once.
        System.setProperty("nacos.core.auth.caching.enabled", String.valueOf(!auth));
        System.setProperty("nacos.core.auth.plugin.nacos.token.secret.key",
                "ZHViYm8tcHktdGVzdHMtbmFjb3Mtc2VydmVyLXNlY3JldC1rZXktMDEyMzQ1Njc4OQ==");
        System.setProperty("nacos.core.auth.server.identity.key", "dubbo-py");
        System.setProperty("nacos.core.auth.server.identity.value", "dubbo-py");
        System.setProperty("nacos.istio.mcp.server.enabled", "false");
        System.setProperty("nacos.k8s.sync.enabled", "false");
        System.setProperty("management.elastic.metrics.export.enabled", "false");
        System.setProperty("management.influx.metrics.export.enabled", "false");
        System.setProperty("spring.autoconfigure.exclude",
                "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration");
        EnvUtil.setDeploymentType(DeploymentType.getType("server"));

        NacosStartUpManager.start(NacosStartUp.CORE_START_UP_PHASE);
        ConfigurableApplicationContext core = new SpringApplicationBuilder(NacosServerBasicApplication.class)
                .web(WebApplicationType.NONE).run();
        NacosStartUpManager.start(NacosStartUp.WEB_START_UP_PHASE);
        new SpringApplicationBuilder(NacosServerWebApplication.class).parent(core).run();
        System.out.println("READY " + port);
        System.out.flush();
    }
}
