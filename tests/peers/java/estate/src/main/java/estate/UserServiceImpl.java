package estate;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class UserServiceImpl implements UserService {
    private final String label;

    UserServiceImpl(String label) {
        this.label = label;
    }

    @Override
    public User getUser(Long id) {
        if (id == 0L) {
            throw new IllegalArgumentException("no user 0 at " + label, new IllegalStateException("ids start at 1"));
        }
        User user = new User();
        user.setId(id);
        user.setName("user-" + id + "@" + label);
        user.setBalance(new BigDecimal("12.50"));
        user.setCreated(new Date(1700000000123L));
        user.setTags(List.of("a", "b"));
        return user;
    }

    @Override
    public User save(User user) {
        user.setName(user.getName() == null ? null : user.getName().toUpperCase());
        return user;
    }

    @Override
    public Map<String, Object> describe(List<Object> items, Map<String, Object> map, Date when, BigDecimal amount) {
        Map<String, Object> out = new LinkedHashMap<>();
        List<String> itemTypes = new ArrayList<>();
        for (Object item : items) {
            itemTypes.add(item == null ? "null" : item.getClass().getName());
        }
        out.put("itemTypes", itemTypes);
        out.put("items", items);
        out.put("mapType", map.getClass().getName());
        out.put("map", map);
        out.put("whenMillis", when.getTime());
        out.put("when", when);
        out.put("amountPlusOne", amount.add(BigDecimal.ONE));
        out.put("label", label);
        return out;
    }

    @Override
    public String nothing() {
        return null;
    }

    @Override
    public long sum(int[] values) {
        long total = 0;
        for (int v : values) total += v;
        return total;
    }

    @Override
    public String kind(String text) {
        return "String:" + text;
    }

    @Override
    public String kind(long number) {
        return "long:" + number;
    }

    @Override
    public String attachment(String key) {
        Object value = org.apache.dubbo.rpc.RpcContext.getServerAttachment().getObjectAttachment(key);
        return value == null ? null : value.toString();
    }

    @Override
    public int sleep(int millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return millis;
    }
}
