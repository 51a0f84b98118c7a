package estate;

import com.alibaba.fastjson2.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.service.GenericService;

/**
 * A Dubbo 3.3 generic consumer (GenericService.$invoke) of estate.UserService, found in the
 * registry, for the generic-call benchmark (bench/bench_generic_dubbo.py): --registry,
 * --application, [--version], [--group], [--protocol dubbo]. Prints "READY"; then each stdin
 * line "run THREADS SECONDS METHOD" calls METHOD (nothing, or kind with the String "bench")
 * from THREADS threads for SECONDS and prints "RESULT {calls, errors, wall_s, cpu_s}", cpu_s
 * being this JVM's CPU time over the run (every thread of it, as a process's CPU is counted).
 */
public final class GenericLoad {
    private GenericLoad() {}

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        System.setOut(System.err);
        Loopback.pin();
        Args args = new Args(argv);
        ApplicationConfig application = new ApplicationConfig(args.require("application"));
        application.setQosEnable(false);
        RegistryConfig registry = new RegistryConfig(args.require("registry"));
        ReferenceConfig<GenericService> reference = new ReferenceConfig<>();
        reference.setInterface("estate.UserService");
        reference.setGeneric("true");
        reference.setProtocol(args.get("protocol", "dubbo"));
        reference.setCheck(false);
        reference.setTimeout(5000);
        String version = args.get("version", "");
        String group = args.get("group", "");
        if (!version.isEmpty()) reference.setVersion(version);
        if (!group.isEmpty()) reference.setGroup(group);
        DubboBootstrap.getInstance().application(application).registry(registry).reference(reference).start();
        GenericService users = reference.get();
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        out.println("READY");
        out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length == 0 || words[0].isEmpty()) continue;
            if (words[0].equals("quit")) break;
            Map<String, Object> result = new LinkedHashMap<>();
            if (!words[0].equals("run") || words.length != 4) {
                result.put("error", "expected: run THREADS SECONDS METHOD");
            } else {
                int threads = Integer.parseInt(words[1]);
                long nanos = (long) (Double.parseDouble(words[2]) * 1e9);
                String method = words[3];
                String[] types = method.equals("kind") ? new String[] {"java.lang.String"} : new String[0];
                Object[] values = method.equals("kind") ? new Object[] {"bench"} : new Object[0];
                AtomicLong calls = new AtomicLong();
                AtomicLong errors = new AtomicLong();
                long cpu0 = os.getProcessCpuTime();
                long t0 = System.nanoTime();
                long end = t0 + nanos;
                List<Thread> workers = new ArrayList<>();
                for (int i = 0; i < threads; i++) {
                    Thread worker = new Thread(() -> {
                        while (System.nanoTime() < end) {
                            try {
                                users.$invoke(method, types, values);
                                calls.incrementAndGet();
                            } catch (RuntimeException e) {
                                errors.incrementAndGet();
                            }
                        }
                    });
                    worker.start();
                    workers.add(worker);
                }
                for (Thread worker : workers) worker.join();
                result.put("calls", calls.get());
                result.put("errors", errors.get());
                result.put("wall_s", (System.nanoTime() - t0) / 1e9);
                result.put("cpu_s", (os.getProcessCpuTime() - cpu0) / 1e9);
            }
            out.println("RESULT " + JSON.toJSONString(result));
            out.flush();
        }
        DubboBootstrap.getInstance().stop();
        System.exit(0);
    }
}
