package estate;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The peers' command line (tests/peers PEER_CONTRACT): --key value, some repeatable. */
final class Args {
    final Map<String, String> single = new HashMap<>();
    final Map<String, List<String>> repeated = new HashMap<>();

    Args(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            String key = argv[i];
            if (!key.startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("bad argument: " + key);
            }
            String value = argv[++i];
            single.put(key.substring(2), value);
            repeated.computeIfAbsent(key.substring(2), k -> new ArrayList<>()).add(value);
        }
    }

    String get(String key, String fallback) {
        return single.getOrDefault(key, fallback);
    }

    String require(String key) {
        String value = single.get(key);
        if (value == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return value;
    }

    List<String> all(String key) {
        return repeated.getOrDefault(key, List.of());
    }
}
