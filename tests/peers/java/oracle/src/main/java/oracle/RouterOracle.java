package oracle;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.dubbo.common.URL;
import org.apache.dubbo.common.URLBuilder;
import org.apache.dubbo.common.url.component.DubboServiceAddressURL;
import org.apache.dubbo.common.utils.NetUtils;
import org.apache.dubbo.common.config.configcenter.ConfigChangeType;
import org.apache.dubbo.common.config.configcenter.ConfigChangedEvent;
import org.apache.dubbo.common.utils.Holder;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.Invocation;
import org.apache.dubbo.rpc.Result;
import org.apache.dubbo.rpc.RpcException;
import org.apache.dubbo.rpc.RpcInvocation;
import org.apache.dubbo.rpc.cluster.Configurator;
import org.apache.dubbo.rpc.cluster.configurator.parser.ConfigParser;
import org.apache.dubbo.rpc.cluster.router.AbstractRouterRule;
import org.apache.dubbo.rpc.cluster.router.affinity.config.AffinityServiceStateRouter;
import org.apache.dubbo.rpc.cluster.router.affinity.config.model.AffinityRuleParser;
import org.apache.dubbo.rpc.cluster.router.condition.ConditionStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.MultiDestConditionRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.AppStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.ListenableStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.ServiceStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.model.ConditionRouterRule;
import org.apache.dubbo.rpc.cluster.router.condition.config.model.ConditionRuleParser;
import org.apache.dubbo.rpc.cluster.router.condition.config.model.MultiDestCondition;
import org.apache.dubbo.rpc.cluster.router.condition.config.model.MultiDestConditionRouterRule;
import org.apache.dubbo.rpc.cluster.router.state.AbstractStateRouter;
import org.apache.dubbo.rpc.cluster.router.state.BitList;
import org.apache.dubbo.rpc.cluster.router.tag.TagStateRouter;
import org.apache.dubbo.rpc.cluster.router.tag.model.TagRouterRule;
import org.apache.dubbo.rpc.cluster.router.tag.model.TagRuleParser;

/**
 * Apache Dubbo 3.3's own routers and configurators answering dubbo-py's routing questions.
 *
 * <p>Reads one JSON case per line on stdin and writes one JSON answer per line on stdout (after
 * a first line {@code READY}): which providers (by index) a rule keeps for a consumer and an
 * invocation, {@code {"error": ...}} when Dubbo refuses the rule (where Dubbo only logs a
 * refusal and routes as if there were no rule, the refusal is reported, as dubbo-py refuses),
 * or for configurators the parameters of each provider URL once configured. Logs go to stderr.
 */
public final class RouterOracle {

    private RouterOracle() {}

    public static void main(String[] args) throws Exception {
        // Dubbo logs to stdout through its default logger: keep stdout for answers only.
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        // Routers log every rule they read at INFO: at thousands of cases a second that is
        // most of the time spent.
        java.util.logging.Logger.getLogger("").setLevel(java.util.logging.Level.SEVERE);
        for (java.util.logging.Handler handler : java.util.logging.Logger.getLogger("").getHandlers()) {
            handler.setLevel(java.util.logging.Level.SEVERE);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("READY");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JSONObject answer;
            Object id = null;
            try {
                JSONObject request = JSON.parseObject(line);
                id = request.get("id");
                answer = answer(request);
            } catch (Throwable e) {
                answer = new JSONObject();
                answer.put("error", describe(e));
            }
            if (id != null) {
                answer.put("id", id);
            }
            out.println(answer.toJSONString());
            if (!in.ready()) {
                out.flush();
            }
        }
        out.flush();
    }

    static String describe(Throwable e) {
        Throwable cause = e;
        while (cause instanceof java.lang.reflect.InvocationTargetException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    static JSONObject answer(JSONObject request) {
        String kind = request.getString("kind");
        switch (kind) {
            case "condition":
                return condition(request);
            case "tag":
                return tag(request);
            case "affinity":
                return affinity(request);
            case "configurator":
                return configurator(request);
            case "consumer-configurator":
                return consumerConfigurator(request);
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
    }

    static JSONObject error(Throwable e) {
        JSONObject answer = new JSONObject();
        answer.put("error", describe(e));
        return answer;
    }

    static RpcInvocation invocation(JSONObject request, URL consumer) {
        JSONObject call = request.getJSONObject("invocation");
        if (call == null) {
            call = new JSONObject();
        }
        JSONArray arguments = call.getJSONArray("arguments");
        Object[] values = arguments == null ? new Object[0] : arguments.toArray();
        Class<?>[] types = new Class<?>[values.length];
        for (int i = 0; i < values.length; i++) {
            types[i] = values[i] == null ? Object.class : values[i].getClass();
        }
        RpcInvocation invocation = new RpcInvocation(
                call.getString("method"), consumer.getServiceInterface(), "", types, values);
        JSONObject attachments = call.getJSONObject("attachments");
        if (attachments != null) {
            for (Map.Entry<String, Object> entry : attachments.entrySet()) {
                invocation.setAttachment(entry.getKey(), String.valueOf(entry.getValue()));
            }
        }
        return invocation;
    }

    /** The providers as invokers, and each invoker's index in the request. */
    static BitList<Invoker<Object>> providers(JSONObject request, Map<Invoker<Object>, Integer> index) {
        List<Invoker<Object>> list = new ArrayList<>();
        JSONArray urls = request.getJSONArray("providers");
        for (int i = 0; i < urls.size(); i++) {
            Invoker<Object> invoker = new UrlInvoker(URL.valueOf(urls.getString(i)));
            list.add(invoker);
            index.put(invoker, i);
        }
        return new BitList<>(list);
    }

    static JSONObject kept(BitList<Invoker<Object>> result, Map<Invoker<Object>, Integer> index) {
        JSONArray kept = new JSONArray();
        for (Invoker<Object> invoker : result) {
            kept.add(index.get(invoker));
        }
        JSONObject answer = new JSONObject();
        answer.put("kept", kept);
        return answer;
    }

    static JSONObject route(
            AbstractStateRouter<Object> router, JSONObject request, URL consumer, BitList<Invoker<Object>> invokers,
            Map<Invoker<Object>, Integer> index) {
        BitList<Invoker<Object>> result =
                router.route(invokers.clone(), consumer, invocation(request, consumer), false, new Holder<>());
        return kept(result, index);
    }

    /**
     * A condition-rule document as a consumer reads it from the config center: Dubbo's
     * ServiceStateRouter (scope service) or AppStateRouter (scope application) fed the document.
     * ListenableStateRouter logs a document it cannot parse or compile and routes as if there
     * were none; the oracle builds the same routers first so that such a refusal is reported.
     */
    static JSONObject condition(JSONObject request) {
        URL consumer = URL.valueOf(request.getString("consumer"));
        String rule = request.getString("rule");
        try {
            AbstractRouterRule parsed = ConditionRuleParser.parse(rule);
            if (parsed == null) {
                throw new IllegalArgumentException("the rule parsed to nothing");
            }
            if (parsed.isValid()) {
                if (parsed instanceof ConditionRouterRule) {
                    for (String condition : ((ConditionRouterRule) parsed).getConditions()) {
                        new ConditionStateRouter<Object>(consumer, condition, parsed.isForce(), parsed.isEnabled());
                    }
                } else if (parsed instanceof MultiDestConditionRouterRule) {
                    for (MultiDestCondition condition : ((MultiDestConditionRouterRule) parsed).getConditions()) {
                        new MultiDestConditionRouter<Object>(consumer, condition, parsed.isForce(), parsed.isEnabled());
                    }
                }
            }
        } catch (Throwable e) {
            return error(e);
        }
        Map<Invoker<Object>, Integer> index = new IdentityHashMap<>();
        BitList<Invoker<Object>> invokers = providers(request, index);
        String scope = request.getString("scope");
        ListenableStateRouter<Object> router = "application".equals(scope)
                ? new AppStateRouter<>(consumer)
                : new ServiceStateRouter<>(consumer);
        router.process(new ConfigChangedEvent("oracle.condition-router", "dubbo", rule, ConfigChangeType.ADDED));
        return route(router, request, consumer, invokers, index);
    }

    /** A tag-router document (the provider application's {@code .tag-router}), or none: static tags. */
    static JSONObject tag(JSONObject request) {
        URL consumer = URL.valueOf(request.getString("consumer"));
        Map<Invoker<Object>, Integer> index = new IdentityHashMap<>();
        BitList<Invoker<Object>> invokers = providers(request, index);
        TagStateRouter<Object> router = new TagStateRouter<>(consumer);
        router.notify(invokers);
        String rule = request.getString("rule");
        if (rule != null && !rule.isEmpty()) {
            try {
                TagRouterRule parsed = TagRuleParser.parse(rule);
                if (parsed == null) {
                    throw new IllegalArgumentException("the rule parsed to nothing");
                }
                parsed.init(router);
                router.setTagRouterRule(parsed);
            } catch (Throwable e) {
                return error(e);
            }
        }
        return route(router, request, consumer, invokers, index);
    }

    /** An affinity-router document read from a service key. */
    static JSONObject affinity(JSONObject request) {
        URL consumer = URL.valueOf(request.getString("consumer"));
        String rule = request.getString("rule");
        try {
            if (AffinityRuleParser.parse(rule) == null) {
                throw new IllegalArgumentException("the rule parsed to nothing");
            }
        } catch (Throwable e) {
            return error(e);
        }
        Map<Invoker<Object>, Integer> index = new IdentityHashMap<>();
        BitList<Invoker<Object>> invokers = providers(request, index);
        AffinityServiceStateRouter<Object> router = new AffinityServiceStateRouter<>(consumer);
        router.process(new ConfigChangedEvent("oracle.affinity-router", "dubbo", rule, ConfigChangeType.ADDED));
        return route(router, request, consumer, invokers, index);
    }

    /**
     * A configurators document as a consumer's directory applies it to its providers'
     * URLs: ConfigParser's override URLs, as configurators, in their order, on each URL.
     */
    static JSONObject configurator(JSONObject request) {
        List<Configurator> configurators;
        try {
            List<URL> urls = ConfigParser.parseConfigurators(request.getString("rule"));
            configurators = Configurator.toConfigurators(urls).orElse(new ArrayList<>());
        } catch (Throwable e) {
            return error(e);
        }
        JSONArray result = new JSONArray();
        JSONArray providers = request.getJSONArray("providers");
        for (int i = 0; i < providers.size(); i++) {
            URL url = URL.valueOf(providers.getString(i));
            for (Configurator configurator : configurators) {
                url = configurator.configure(url);
            }
            result.add(new TreeMap<>(url.getParameters()));
        }
        JSONObject answer = new JSONObject();
        answer.put("urls", result);
        return answer;
    }

    /** The four parameters RegistryDirectory seeds a provider's override URL with. */
    static final String[] OVERRIDE_SEEDS = {"application", "side", "group", "version"};

    /**
     * NetUtils.getLocalHost(), which AbstractConfigurator matches a consumer-side item's
     * address with, set to the case's consumer host: a consumer registers its URL with that
     * host, so the consumer of the case runs there.
     */
    static void runOn(String host) {
        try {
            java.lang.reflect.Field field = NetUtils.class.getDeclaredField("HOST_ADDRESS");
            field.setAccessible(true);
            field.set(null, host);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot set NetUtils.HOST_ADDRESS", e);
        }
    }

    /**
     * A configurators document as a consumer applies it (RegistryDirectory): "consumer" is the
     * consumer URL's parameters once configured (the directory URL, overrideWithConfigurator
     * of the original consumer URL); "urls" is, per provider, what the configurators set on the
     * override URL RegistryDirectory keeps for that provider (a DubboServiceAddressURL of the
     * provider for this consumer: side and application are the consumer's, group and version
     * the provider's), without those four seeds. Provider-side items apply to neither (the
     * sides differ); they are the configurator kind's question.
     */
    static JSONObject consumerConfigurator(JSONObject request) {
        List<Configurator> configurators;
        try {
            List<URL> urls = ConfigParser.parseConfigurators(request.getString("rule"));
            configurators = Configurator.toConfigurators(urls).orElse(new ArrayList<>());
        } catch (Throwable e) {
            return error(e);
        }
        URL consumer = URL.valueOf(request.getString("consumer"));
        runOn(consumer.getHost());
        URL directory = consumer;
        for (Configurator configurator : configurators) {
            directory = configurator.configure(directory);
        }
        JSONArray result = new JSONArray();
        JSONArray providers = request.getJSONArray("providers");
        for (int i = 0; i < providers.size(); i++) {
            // Encoded, as a registry holds it (a ZooKeeper node's name).
            DubboServiceAddressURL address =
                    DubboServiceAddressURL.valueOf(URL.encode(providers.getString(i)), consumer);
            URL overridden = URLBuilder.from(address)
                    .clearParameters()
                    .addParameter("application", address.getApplication())
                    .addParameter("side", address.getSide())
                    .addParameter("group", address.getGroup())
                    .addParameter("version", address.getVersion())
                    .build();
            for (Configurator configurator : configurators) {
                overridden = configurator.configure(overridden);
            }
            Map<String, String> set = new TreeMap<>(overridden.getParameters());
            for (String seed : OVERRIDE_SEEDS) {
                set.remove(seed);
            }
            result.add(set);
        }
        JSONObject answer = new JSONObject();
        answer.put("consumer", new TreeMap<>(directory.getParameters()));
        answer.put("urls", result);
        return answer;
    }

    /** An invoker that is only its URL: what routers read. */
    static final class UrlInvoker implements Invoker<Object> {
        private final URL url;

        UrlInvoker(URL url) {
            this.url = url;
        }

        @Override
        public Class<Object> getInterface() {
            return Object.class;
        }

        @Override
        public Result invoke(Invocation invocation) throws RpcException {
            throw new RpcException("the oracle's invokers are never called");
        }

        @Override
        public URL getUrl() {
            return url;
        }

        @Override
        public boolean isAvailable() {
            return true;
        }

        @Override
        public void destroy() {}
    }
}
