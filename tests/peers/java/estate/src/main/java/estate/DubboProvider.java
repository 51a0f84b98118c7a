package estate;

import java.io.PrintStream;
import java.net.ServerSocket;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;

/**
 * A Dubbo 3.3 provider of the Java interface estate.UserService over dubbo:// (Hessian2),
 * registered in ZooKeeper: --registry, --application, --name, [--port], [--version], [--group];
 * --protocol tri exports it over Triple instead: a plain interface, so Triple without IDL
 * (Hessian2 inside TripleRequestWrapper/TripleResponseWrapper, registered as tri://);
 * --serialization default leaves the protocol's serialization unset (Dubbo's default
 * configuration: the URL names none); --greeter true also exports demo.Greeter over dubbo:// (same version and group), so that the
 * registry holds dubbo:// providers of an interface dubbo-py's gRPC stubs call over Triple;
 * --tri-group G also exports UserService (same version) in group G over Triple without IDL, on
 * a port of its own, so one process serves a test module's dubbo:// and tri:// halves (the
 * groups keep them apart: a reference finds one protocol's providers only).
 * Prints "READY 127.0.0.1:port" on stdout (with --tri-group "READY 127.0.0.1:port
 * 127.0.0.1:triPort"); serves until stdin closes.
 */
public final class DubboProvider {
    private DubboProvider() {}

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        System.setOut(System.err);
        System.setProperty("dubbo.service.shutdown.wait", "1000");
        Loopback.pin();
        Args args = new Args(argv);
        String name = args.require("name");
        int port = Integer.parseInt(args.get("port", "0"));
        if (port == 0) port = freePort();
        String address = "127.0.0.1:" + port;
        String triGroup = args.get("tri-group", "");
        ApplicationConfig application = new ApplicationConfig(args.require("application"));
        application.setQosEnable(false);
        application.setRegisterMode(args.get("register-mode", "interface"));
        // --metadata-type remote: the application-level MetadataInfo in the metadata report
        // (local, Dubbo's default, serves it only by MetadataService on this provider).
        String metadataType = args.get("metadata-type", "");
        if (!metadataType.isEmpty()) application.setMetadataType(metadataType);
        RegistryConfig registry = new RegistryConfig(args.require("registry"));
        ProtocolConfig protocol = new ProtocolConfig(args.get("protocol", "dubbo"), port);
        protocol.setHost("127.0.0.1");
        // --serialization default leaves it unset, as a provider with Dubbo's default
        // configuration: its URL then names no serialization (only prefer.serialization).
        String serialization = args.get("serialization", "hessian2");
        if (!serialization.equals("default")) protocol.setSerialization(serialization);
        ProtocolConfig triple = null;
        if (!triGroup.isEmpty()) {
            triple = new ProtocolConfig("tri", freePort());
            triple.setHost("127.0.0.1");
            if (!serialization.equals("default")) triple.setSerialization(serialization);
        }

        ServiceConfig<UserService> service = new ServiceConfig<>();
        service.setInterface(UserService.class);
        service.setRef(new UserServiceImpl(name));
        String version = args.get("version", "");
        String group = args.get("group", "");
        if (!version.isEmpty()) service.setVersion(version);
        if (!group.isEmpty()) service.setGroup(group);

        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application)
                .registry(registry)
                .protocol(protocol)
                .service(service);
        if (triple != null) {
            // Each export names its protocol: a service without one is exported on every
            // protocol the bootstrap has.
            service.setProtocol(protocol);
            ServiceConfig<UserService> overTriple = new ServiceConfig<>();
            overTriple.setInterface(UserService.class);
            overTriple.setRef(new UserServiceImpl(name));
            if (!version.isEmpty()) overTriple.setVersion(version);
            overTriple.setGroup(triGroup);
            overTriple.setProtocol(triple);
            bootstrap.protocol(triple).service(overTriple);
            address += " 127.0.0.1:" + triple.getPort();
        }
        if (args.get("greeter", "false").equals("true")) {
            ServiceConfig<demo.Greeter> greeter = new ServiceConfig<>();
            greeter.setInterface(demo.Greeter.class);
            greeter.setRef(new Provider.GreeterImpl(name, "127.0.0.1:" + port));
            greeter.setProtocol(protocol);
            if (!version.isEmpty()) greeter.setVersion(version);
            if (!group.isEmpty()) greeter.setGroup(group);
            bootstrap.service(greeter);
        }
        bootstrap.start();
        out.println("READY " + address);
        out.flush();
        while (System.in.read() >= 0) {}
        bootstrap.stop();
        System.exit(0);
    }

    private static int freePort() throws java.io.IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }
}
