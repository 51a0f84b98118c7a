package estate;

import com.alibaba.fastjson2.JSON;
import demo.Chat;
import demo.ChatOuterClass.Line;
import demo.ChatOuterClass.Summary;
import demo.Greeter;
import demo.GreeterOuterClass.HelloReply;
import demo.GreeterOuterClass.HelloRequest;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.dubbo.common.stream.StreamObserver;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.RpcContext;

/** A Dubbo 3.3 provider of demo.Greeter and demo.Chat over Triple, per PEER_CONTRACT.md. */
public final class Provider {
    private Provider() {}

    static final class GreeterImpl implements Greeter {
        private final String label;
        private final String address;

        GreeterImpl(String label, String address) {
            this.label = label;
            this.address = address;
        }

        @Override
        public HelloReply SayHello(HelloRequest request) {
            String name = request.getName();
            String message;
            if (name.equals("fail")) {
                throw new IllegalStateException(label + " refused fail");
            } else if (name.startsWith("sleep:")) {
                try {
                    Thread.sleep(Long.parseLong(name.substring(6)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                message = label + ": hello " + name;
            } else if (name.equals("attachments")) {
                Map<String, Object> seen = new TreeMap<>();
                RpcContext.getServerAttachment().getObjectAttachments().forEach((k, v) -> seen.put(k, String.valueOf(v)));
                message = JSON.toJSONString(seen);
            } else if (name.startsWith("big:")) {
                message = "x".repeat(Integer.parseInt(name.substring(4)));
            } else {
                message = label + ": hello " + name;
            }
            return HelloReply.newBuilder().setMessage(message).setProvider(address).setShard(-1).build();
        }

        @Override
        public void SayHelloStream(HelloRequest request, StreamObserver<HelloReply> replies) {
            if (request.getName().equals("fail")) {
                replies.onError(new IllegalStateException(label + " refused fail"));
                return;
            }
            for (int i = 0; i < request.getCount(); i++) {
                replies.onNext(HelloReply.newBuilder()
                        .setMessage(label + ": hello " + request.getName() + " #" + i)
                        .setProvider(address)
                        .build());
            }
            replies.onCompleted();
        }
    }

    static final class ChatImpl implements Chat {
        private final String address;

        ChatImpl(String address) {
            this.address = address;
        }

        @Override
        public StreamObserver<Line> Collect(StreamObserver<Summary> summary) {
            List<String> lines = new ArrayList<>();
            return new StreamObserver<>() {
                @Override
                public void onNext(Line line) {
                    lines.add(line.getText());
                }

                @Override
                public void onError(Throwable t) {}

                @Override
                public void onCompleted() {
                    summary.onNext(Summary.newBuilder()
                            .setCount(lines.size())
                            .setJoined(String.join(",", lines))
                            .setProvider(address)
                            .build());
                    summary.onCompleted();
                }
            };
        }

        @Override
        public StreamObserver<Line> Echo(StreamObserver<Line> lines) {
            return new StreamObserver<>() {
                @Override
                public void onNext(Line line) {
                    lines.onNext(Line.newBuilder().setText(line.getText()).setProvider(address).build());
                }

                @Override
                public void onError(Throwable t) {}

                @Override
                public void onCompleted() {
                    lines.onCompleted();
                }
            };
        }
    }

    public static void main(String[] argv) throws Exception {
        // stdout carries only the READY line; everything Dubbo prints goes to stderr.
        PrintStream out = System.out;
        System.setOut(System.err);
        // A test stops the provider by closing stdin; Dubbo's default 10 s drain is only waiting.
        System.setProperty("dubbo.service.shutdown.wait", "1000");
        Loopback.pin();
        Args args = new Args(argv);
        String name = args.require("name");
        int port = Integer.parseInt(args.get("port", "0"));
        if (port == 0) {
            try (ServerSocket probe = new ServerSocket(0)) {
                port = probe.getLocalPort();
            }
        }
        String address = "127.0.0.1:" + port;

        ApplicationConfig application = new ApplicationConfig(args.require("application"));
        application.setQosEnable(false);
        application.setRegisterMode(args.get("register-mode", "all"));
        // --metadata-type remote: the MetadataInfo goes to the metadata report (on Nacos, data id
        // <app> in group <revision>) instead of being served only by MetadataService (local,
        // Dubbo's default).
        String metadataType = args.get("metadata-type", "");
        if (!metadataType.isEmpty()) application.setMetadataType(metadataType);
        RegistryConfig registry = new RegistryConfig(args.require("registry"));
        ProtocolConfig protocol = new ProtocolConfig("tri", port);
        protocol.setHost("127.0.0.1");

        Map<String, String> params = new HashMap<>();
        for (String kv : args.all("param")) {
            int eq = kv.indexOf('=');
            params.put(kv.substring(0, eq), kv.substring(eq + 1));
        }

        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application)
                .registry(registry)
                .protocol(protocol);
        // --tls-cert/--tls-key [--tls-ca]: Dubbo's SslConfig; the URL then says ssl-enabled=true.
        org.apache.dubbo.config.SslConfig ssl = Tls.of(args, true);
        if (ssl != null) {
            protocol.setSslEnabled(true);
            bootstrap.ssl(ssl);
        }
        List<String> services = args.all("service");
        if (services.isEmpty()) {
            services = List.of(args.get("version", "") + ":" + args.get("group", ""));
        }
        boolean labelled = !args.all("service").isEmpty();
        for (String vg : services) {
            int colon = vg.indexOf(':');
            String version = colon < 0 ? vg : vg.substring(0, colon);
            String group = colon < 0 ? "" : vg.substring(colon + 1);
            ServiceConfig<Greeter> greeter = new ServiceConfig<>();
            greeter.setInterface(Greeter.class);
            String label = labelled ? name + " [" + version + ":" + group + "]" : name;
            greeter.setRef(new GreeterImpl(label, address));
            if (!version.isEmpty()) greeter.setVersion(version);
            if (!group.isEmpty()) greeter.setGroup(group);
            if (!params.isEmpty()) greeter.setParameters(params);
            bootstrap.service(greeter);
        }
        ServiceConfig<Chat> chat = new ServiceConfig<>();
        chat.setInterface(Chat.class);
        chat.setRef(new ChatImpl(address));
        bootstrap.service(chat);
        bootstrap.start();

        out.println("READY " + address);
        out.flush();
        // Serves until stdin closes (the test ended) or the process is killed.
        while (System.in.read() >= 0) {}
        bootstrap.stop();
        System.exit(0);
    }
}
