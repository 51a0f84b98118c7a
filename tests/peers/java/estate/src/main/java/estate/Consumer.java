package estate;

import com.alibaba.fastjson2.JSON;
import demo.Chat;
import demo.ChatOuterClass.Line;
import demo.ChatOuterClass.Summary;
import demo.Greeter;
import demo.GreeterOuterClass.HelloReply;
import demo.GreeterOuterClass.HelloRequest;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.dubbo.common.config.configcenter.DynamicConfiguration;
import org.apache.dubbo.common.stream.StreamObserver;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.RpcContext;
import org.apache.dubbo.rpc.model.ApplicationModel;

/**
 * A Dubbo 3.3 consumer of demo.Greeter (and demo.Chat: collect, echo) driven over stdin, per
 * PEER_CONTRACT.md.
 */
public final class Consumer {
    private Consumer() {}

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        System.setOut(System.err);
        Loopback.pin();
        Args args = new Args(argv);
        String migration = args.get("migration", "");
        if (!migration.isEmpty()) {
            // Dubbo's own knob for the consumer's migration step (before any rule arrives).
            System.setProperty("dubbo.application.service-discovery.migration", migration);
        }
        ApplicationConfig application = new ApplicationConfig(args.require("application"));
        application.setQosEnable(false);
        RegistryConfig registry = new RegistryConfig(args.require("registry"));
        ReferenceConfig<Greeter> reference = new ReferenceConfig<>();
        reference.setInterface(Greeter.class);
        reference.setProtocol("tri");
        reference.setCheck(false);
        reference.setTimeout(Integer.parseInt(args.get("timeout", "3000")));
        String version = args.get("version", "");
        String group = args.get("group", "");
        if (!version.isEmpty()) reference.setVersion(version);
        if (!group.isEmpty()) reference.setGroup(group);
        // --param k=v: consumer URL parameters (an affinity rule compares them with providers').
        Map<String, String> params = new LinkedHashMap<>();
        for (String kv : args.all("param")) {
            int eq = kv.indexOf('=');
            params.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        if (!params.isEmpty()) reference.setParameters(params);
        // demo.Chat without version or group, as the estate peers serve it.
        ReferenceConfig<Chat> chatReference = new ReferenceConfig<>();
        chatReference.setInterface(Chat.class);
        chatReference.setProtocol("tri");
        chatReference.setCheck(false);
        chatReference.setTimeout(reference.getTimeout());
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application)
                .registry(registry)
                .reference(reference)
                .reference(chatReference);
        // --tls-cert/--tls-key [--tls-ca] [--tls-verify-host false]: Dubbo's SslConfig.
        org.apache.dubbo.config.SslConfig ssl = Tls.of(args, false);
        if (ssl != null) bootstrap.ssl(ssl);
        bootstrap.start();
        Greeter greeter = reference.get();
        Chat chat = chatReference.get();
        out.println("READY");
        out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length == 0 || words[0].isEmpty()) continue;
            if (words[0].equals("quit")) break;
            int n = words.length > 1 && words[1].matches("\\d+") ? Integer.parseInt(words[1]) : 1;
            String name = "java";
            Map<String, String> attachments = new LinkedHashMap<>();
            for (int i = 2; i < words.length; i++) {
                int eq = words[i].indexOf('=');
                if (eq < 0) continue;
                String k = words[i].substring(0, eq);
                String v = words[i].substring(eq + 1);
                if (k.equals("name")) name = v;
                else attachments.put(k, v);
            }
            Map<String, Object> result = new LinkedHashMap<>();
            if (words[0].equals("call")) {
                Map<String, Integer> ok = new LinkedHashMap<>();
                Map<String, Integer> errors = new LinkedHashMap<>();
                List<String> messages = new ArrayList<>();
                List<Integer> sizes = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    attachments.forEach((k, v) -> RpcContext.getClientAttachment().setAttachment(k, v));
                    try {
                        HelloReply reply = greeter.SayHello(HelloRequest.newBuilder().setName(name).build());
                        String message = reply.getMessage();
                        int colon = message.indexOf(':');
                        String key = colon < 0 || message.startsWith("{") ? message : message.substring(0, colon);
                        // A long reply is counted by its length and cut to 64 Ki chars.
                        if (message.length() > 65536) key = "<" + message.length() + " chars>";
                        ok.merge(key, 1, Integer::sum);
                        if (messages.size() < 3) {
                            sizes.add(message.length());
                            messages.add(message.length() > 65536 ? message.substring(0, 65536) : message);
                        }
                    } catch (RuntimeException e) {
                        errors.merge(describe(e), 1, Integer::sum);
                    }
                }
                result.put("ok", ok);
                result.put("errors", errors);
                result.put("messages", messages);
                result.put("sizes", sizes);
            } else if (words[0].equals("load")) {
                // load THREADS MILLIS [name=...]: THREADS threads call SayHello back to back for
                // MILLIS ms (a fault is injected meanwhile); every call counted, none dropped.
                int millis = words.length > 2 && !words[2].contains("=") ? Integer.parseInt(words[2]) : 3000;
                result.putAll(load(greeter, n, millis, name));
            } else if (words[0].equals("stream")) {
                List<String> messages = new ArrayList<>();
                List<String> errors = new ArrayList<>();
                CountDownLatch done = new CountDownLatch(1);
                greeter.SayHelloStream(HelloRequest.newBuilder().setName(name).setCount(n).build(),
                        new StreamObserver<>() {
                            @Override
                            public void onNext(HelloReply reply) {
                                synchronized (messages) {
                                    messages.add(reply.getMessage());
                                }
                            }

                            @Override
                            public void onError(Throwable t) {
                                errors.add(describe(t));
                                done.countDown();
                            }

                            @Override
                            public void onCompleted() {
                                done.countDown();
                            }
                        });
                done.await();
                result.put("messages", messages);
                result.put("errors", errors);
            } else if (words[0].equals("publish") || words[0].equals("unpublish")) {
                // publish KEY GROUP BASE64 / unpublish KEY GROUP: a rule written (or removed) by
                // Dubbo's own DynamicConfiguration, as a Java tool in the estate writes it.
                try {
                    DynamicConfiguration config = ApplicationModel.defaultModel()
                            .modelEnvironment()
                            .getDynamicConfiguration()
                            .orElseThrow(() -> new IllegalStateException("no config center"));
                    boolean done = words[0].equals("publish")
                            ? config.publishConfig(words[1], words[2],
                                    new String(Base64.getDecoder().decode(words[3]), StandardCharsets.UTF_8))
                            : config.removeConfig(words[1], words[2]);
                    result.put("done", done);
                } catch (RuntimeException e) {
                    result.put("done", false);
                    result.put("error", e.toString());
                }
            } else if (words[0].equals("collect")) {
                result.putAll(collect(chat, n, name));
            } else if (words[0].equals("echo")) {
                result.putAll(echo(chat, n, name));
            } else {
                result.put("errors", Map.of("unknown command " + words[0], 1));
            }
            out.println("RESULT " + JSON.toJSONString(result));
            out.flush();
        }
        bootstrap.stop();
        System.exit(0);
    }

    /** The width of the time slices the load command counts replies in. */
    static final long BUCKET_MS = 250;

    /**
     * Calls from {@code threads} threads for {@code millis} ms: how many calls were made, the
     * replies by the provider address that answered, the failures by what the caller saw, and
     * when (ms after the start) each provider last answered and the first and last failure were
     * seen, and each provider's replies per 250 ms, so a test can tell how the calls were spread
     * before a fault and that they went on past it.
     */
    static Map<String, Object> load(Greeter greeter, int threads, int millis, String name) throws InterruptedException {
        Map<String, Integer> ok = new TreeMap<>();
        Map<String, Integer> errors = new TreeMap<>();
        Map<String, Long> lastOk = new TreeMap<>();
        List<Long> errorMs = new ArrayList<>();
        int bucketCount = (int) (millis / BUCKET_MS) + 1;
        Map<String, int[]> perBucket = new TreeMap<>();
        long start = System.nanoTime();
        long end = start + millis * 1_000_000L;
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> {
                HelloRequest request = HelloRequest.newBuilder().setName(name).build();
                while (System.nanoTime() < end) {
                    try {
                        String provider = greeter.SayHello(request).getProvider();
                        long at = (System.nanoTime() - start) / 1_000_000L;
                        synchronized (ok) {
                            ok.merge(provider, 1, Integer::sum);
                            lastOk.merge(provider, at, Math::max);
                            int[] buckets = perBucket.computeIfAbsent(provider, k -> new int[bucketCount]);
                            buckets[(int) Math.min(bucketCount - 1, at / BUCKET_MS)]++;
                        }
                    } catch (RuntimeException e) {
                        long at = (System.nanoTime() - start) / 1_000_000L;
                        synchronized (ok) {
                            errors.merge(describe(e), 1, Integer::sum);
                            errorMs.add(at);
                            // The whole trace goes to the log (stderr), which names the layer
                            // that gave up; stdout keeps only the RESULT line.
                            if (errorMs.size() <= 5) e.printStackTrace();
                        }
                    }
                }
            }, "load-" + t);
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) worker.join();
        Map<String, Object> result = new LinkedHashMap<>();
        synchronized (ok) {
            int calls = ok.values().stream().mapToInt(Integer::intValue).sum()
                    + errors.values().stream().mapToInt(Integer::intValue).sum();
            result.put("calls", calls);
            result.put("ok", ok);
            result.put("errors", errors);
            result.put("last_ok_ms", lastOk);
            result.put("ok_per_250ms", perBucket);
            result.put("error_ms", errorMs.isEmpty() ? List.of() : List.of(Collections.min(errorMs), Collections.max(errorMs)));
        }
        return result;
    }

    /** collect N: N lines NAME#i on one request stream, then the one summary (or the error). */
    static Map<String, Object> collect(Chat chat, int n, String name) throws InterruptedException {
        Map<String, Object> result = new LinkedHashMap<>();
        List<String> errors = new ArrayList<>();
        CountDownLatch done = new CountDownLatch(1);
        StreamObserver<Line> lines = chat.Collect(new StreamObserver<>() {
            @Override
            public void onNext(Summary summary) {
                synchronized (result) {
                    result.put("count", summary.getCount());
                    result.put("joined", summary.getJoined());
                    result.put("provider", summary.getProvider());
                }
            }

            @Override
            public void onError(Throwable t) {
                synchronized (result) {
                    errors.add(describe(t));
                }
                done.countDown();
            }

            @Override
            public void onCompleted() {
                done.countDown();
            }
        });
        for (int i = 0; i < n; i++) lines.onNext(Line.newBuilder().setText(name + "#" + i).build());
        lines.onCompleted();
        if (!done.await(10, TimeUnit.SECONDS)) errors.add("no summary in 10 s");
        synchronized (result) {
            result.put("errors", errors);
            return result;
        }
    }

    /**
     * echo N: N lines NAME#i on a bidirectional stream, each sent only after the echo of the one
     * before arrived (so the stream is answered as it goes), then the end of the stream.
     */
    static Map<String, Object> echo(Chat chat, int n, String name) throws InterruptedException {
        BlockingQueue<Object> received = new LinkedBlockingQueue<>();
        Object end = new Object();
        StreamObserver<Line> lines = chat.Echo(new StreamObserver<>() {
            @Override
            public void onNext(Line line) {
                received.add(line);
            }

            @Override
            public void onError(Throwable t) {
                received.add(t);
            }

            @Override
            public void onCompleted() {
                received.add(end);
            }
        });
        List<String> messages = new ArrayList<>();
        Map<String, Integer> providers = new TreeMap<>();
        List<String> errors = new ArrayList<>();
        for (int i = 0; i < n && errors.isEmpty(); i++) {
            lines.onNext(Line.newBuilder().setText(name + "#" + i).build());
            Object got = received.poll(10, TimeUnit.SECONDS);
            if (got instanceof Line line) {
                messages.add(line.getText());
                providers.merge(line.getProvider(), 1, Integer::sum);
            } else if (got instanceof Throwable t) {
                errors.add(describe(t));
            } else {
                errors.add(got == null ? "no echo in 10 s" : "stream ended early");
            }
        }
        lines.onCompleted();
        if (errors.isEmpty()) {
            Object last = received.poll(10, TimeUnit.SECONDS);
            if (last instanceof Throwable t) errors.add(describe(t));
            else if (last != end) errors.add("stream did not end: " + last);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("messages", messages);
        result.put("providers", providers);
        result.put("errors", errors);
        return result;
    }

    /** The exception as a Dubbo user sees it: its class and first message line. */
    static String describe(Throwable t) {
        String message = String.valueOf(t.getMessage());
        int nl = message.indexOf('\n');
        if (nl >= 0) message = message.substring(0, nl);
        return t.getClass().getSimpleName() + ": " + message;
    }
}
