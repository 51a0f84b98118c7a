package hessian;

import com.alibaba.com.caucho.hessian.io.Hessian2Input;
import com.alibaba.com.caucho.hessian.io.Hessian2Output;
import com.alibaba.com.caucho.hessian.io.SerializerFactory;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Array;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * dubbo-py's Hessian2 oracle: Dubbo's hessian-lite answering one line at a time.
 *
 * <p>Commands on stdin, one per line; one answer line each on stdout, {@code OK ...} or
 * {@code ERR message}:
 *
 * <ul>
 *   <li>{@code roundtrip B64}: decode the value with hessian-lite and encode it again; {@code OK
 *       B64}.
 *   <li>{@code describe B64}: decode the value; {@code OK} and what Java holds (class names and
 *       values, recursively).
 *   <li>{@code fixture NAME}: a value built in Java, encoded; {@code OK B64}.
 *   <li>{@code stream NAME}: several values on one stream, as Dubbo's DubboCodec writes a
 *       request or response body; {@code OK B64}.
 * </ul>
 */
public final class HessianOracle {
  private static final SerializerFactory FACTORY = new SerializerFactory();

  private HessianOracle() {}

  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    out.println("READY hessian-lite");
    String line;
    while ((line = in.readLine()) != null) {
      line = line.trim();
      if (line.isEmpty()) {
        continue;
      }
      String[] parts = line.split(" ", 2);
      String arg = parts.length > 1 ? parts[1] : "";
      try {
        switch (parts[0]) {
          case "roundtrip":
            out.println("OK " + b64(encode(decode(arg))));
            break;
          case "describe":
            out.println("OK " + describe(decode(arg)));
            break;
          case "fixture":
            out.println("OK " + b64(encode(fixture(arg))));
            break;
          case "stream":
            out.println("OK " + b64(encode(stream(arg))));
            break;
          case "quit":
            return;
          default:
            out.println("ERR unknown command " + parts[0]);
        }
      } catch (Throwable e) {
        String message = String.valueOf(e).replace('\n', ' ');
        out.println("ERR " + message);
      }
    }
  }

  private static String b64(byte[] data) {
    return Base64.getEncoder().encodeToString(data);
  }

  static Object decode(String b64) throws Exception {
    Hessian2Input input =
        new Hessian2Input(new ByteArrayInputStream(Base64.getDecoder().decode(b64)));
    input.setSerializerFactory(FACTORY);
    return input.readObject();
  }

  /** Values written one after another on one stream (a dubbo:// body). */
  static Object[] stream(String name) {
    Map<String, Object> attachments = new HashMap<>();
    switch (name) {
      case "request":
        attachments.put("path", "com.example.UserService");
        attachments.put("timeout", "3000");
        return new Object[] {"2.0.2", "com.example.UserService", "1.0", "getUser",
            "JLjava/lang/String;", 7L, "x", attachments};
      case "response-value":
        attachments.put("dubbo", "2.0.2");
        return new Object[] {4, bean(), attachments};
      case "response-null":
        return new Object[] {2};
      case "response-exception":
        attachments.put("dubbo", "2.0.2");
        return new Object[] {3, new IllegalStateException("no such user"), attachments};
      default:
        throw new IllegalArgumentException("no stream " + name);
    }
  }

  static byte[] encode(Object[] values) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Hessian2Output output = new Hessian2Output(bytes);
    output.setSerializerFactory(FACTORY);
    for (Object value : values) {
      output.writeObject(value);
    }
    output.flush();
    return bytes.toByteArray();
  }

  static byte[] encode(Object value) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Hessian2Output output = new Hessian2Output(bytes);
    output.setSerializerFactory(FACTORY);
    output.writeObject(value);
    output.flush();
    return bytes.toByteArray();
  }

  static String describe(Object value) {
    if (value == null) {
      return "null";
    }
    String cls = value.getClass().getName();
    if (value instanceof Map<?, ?> map) {
      List<String> entries = new ArrayList<>();
      for (Map.Entry<?, ?> e : map.entrySet()) {
        entries.add(describe(e.getKey()) + "=" + describe(e.getValue()));
      }
      if (!(value instanceof TreeMap) && !(value instanceof LinkedHashMap)) {
        entries.sort(null);
      }
      return cls + "{" + String.join(",", entries) + "}";
    }
    if (value instanceof Collection<?> items) {
      List<String> entries = new ArrayList<>();
      for (Object item : items) {
        entries.add(describe(item));
      }
      if (value instanceof HashSet && !(value instanceof java.util.LinkedHashSet)) {
        entries.sort(null);
      }
      return cls + "[" + String.join(",", entries) + "]";
    }
    if (value.getClass().isArray()) {
      List<String> entries = new ArrayList<>();
      for (int i = 0; i < Array.getLength(value); i++) {
        entries.add(describe(Array.get(value, i)));
      }
      return cls + "[" + String.join(",", entries) + "]";
    }
    if (value instanceof Date date) {
      return cls + "(" + date.getTime() + ")";
    }
    if (value instanceof Bean bean) {
      return cls + "(" + bean.name + "," + bean.age + "," + bean.id + "," + describe(bean.color)
          + "," + describe(bean.balance) + ")";
    }
    return cls + "(" + value + ")";
  }

  static byte[] pattern(int length) {
    byte[] data = new byte[length];
    for (int i = 0; i < length; i++) {
      data[i] = (byte) (i % 251);
    }
    return data;
  }

  static Bean bean() {
    Bean bean = new Bean();
    bean.name = "Zoë \uD83D\uDE00";
    bean.age = 42;
    bean.id = 1L << 40;
    bean.score = 98.5;
    bean.active = true;
    bean.born = new Date(631152000123L);
    bean.balance = new BigDecimal("12345678901234567890.123456789");
    bean.avatar = pattern(20);
    bean.tags = new ArrayList<>(List.of("a", "b"));
    bean.counts = new HashMap<>(Map.of("x", 1, "y", 2));
    bean.color = Color.GREEN;
    return bean;
  }

  static String repeat(String unit, int count) {
    return unit.repeat(count);
  }

  static Object fixture(String name) {
    switch (name) {
      case "null":
        return null;
      case "booleans":
        return new ArrayList<>(List.of(true, false));
      case "ints":
        return new ArrayList<>(
            List.of(0, -16, 47, 48, -17, -2048, 2047, 2048, -2049, -262144, 262143, 262144,
                -262145, Integer.MIN_VALUE, Integer.MAX_VALUE));
      case "longs":
        return new ArrayList<>(
            List.of(0L, -8L, 15L, 16L, -9L, -2048L, 2047L, 2048L, -262144L, 262143L, 262144L,
                (long) Integer.MIN_VALUE, (long) Integer.MAX_VALUE, 1L << 31, Long.MIN_VALUE,
                Long.MAX_VALUE));
      case "doubles":
        return new ArrayList<>(
            List.of(0.0, 1.0, -1.0, 127.0, -128.0, 128.0, 32767.0, -32768.0, 32768.0, 12.25,
                0.001, -2.5, 3.14159, 1e300, Double.MAX_VALUE, Double.MIN_VALUE,
                Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 0.1f + 0.0));
      case "nan":
        return Double.NaN;
      case "strings":
        return new ArrayList<>(
            List.of("", "a", repeat("b", 31), repeat("c", 32), repeat("d", 1023),
                repeat("e", 1024), "h\u00e9llo \u65e5\u672c", "\uD83D\uDE00 \uD83C\uDF89",
                "nul\u0000char", repeat("x", 0x7fff) + "\uD83D\uDE00" + repeat("y", 40000)));
      case "binaries":
        return new ArrayList<>(
            List.of(pattern(0), pattern(15), pattern(16), pattern(1023), pattern(1024),
                pattern(70000)));
      case "dates":
        return new ArrayList<>(
            List.of(new Date(0), new Date(1600000020000L), new Date(1600000000123L),
                new Date(-1L), new Date(-62135596800000L)));
      case "decimals":
        return new ArrayList<>(
            List.of(new BigDecimal("12345678901234567890.123456789"), BigDecimal.ZERO,
                new BigDecimal("-1E+10"), new BigDecimal("0.000001")));
      case "bean":
        return bean();
      case "enums":
        return new ArrayList<>(List.of(Color.RED, Color.GREEN, Color.RED));
      case "collections":
        {
          Map<String, Object> all = new LinkedHashMap<>();
          all.put("arrayList", new ArrayList<>(List.of(1, 2)));
          all.put("linkedList", new LinkedList<>(List.of("p", "q")));
          all.put("hashSet", new HashSet<>(List.of("s", "t")));
          all.put("treeSet", new TreeSet<>(List.of(3, 1, 2)));
          all.put("treeMap", new TreeMap<>(Map.of("k1", 1, "k2", 2)));
          all.put("hashMap", new HashMap<>(Map.of(1, "one", 2, "two")));
          all.put("intArray", new int[] {1, 2, 3});
          all.put("longArray", new long[] {5L, 1L << 40});
          all.put("stringArray", new String[] {"x", "y"});
          all.put("objectArray", new Object[] {1, "two", null});
          all.put("emptyList", new ArrayList<>());
          all.put("nested", new ArrayList<>(List.of(new HashMap<>(Map.of("a", Arrays.asList(1, 2))),
              new ArrayList<>(List.of(new ArrayList<>())))));
          all.put("list9", new ArrayList<>(List.of(1, 2, 3, 4, 5, 6, 7, 8, 9)));
          return all;
        }
      case "shared":
        {
          Bean one = bean();
          List<Object> list = new ArrayList<>(List.of("shared"));
          Bean self = new Bean();
          self.name = "self";
          self.friend = self;
          return new ArrayList<>(Arrays.asList(one, one, list, list, self));
        }
      case "javatypes":
        {
          Map<String, Object> all = new LinkedHashMap<>();
          all.put("bigInteger", new java.math.BigInteger("123456789012345678901234567890"));
          all.put("timestamp", new java.sql.Timestamp(1600000000123L));
          all.put("sqlDate", new java.sql.Date(1600000000000L));
          all.put("localDate", java.time.LocalDate.of(2024, 2, 29));
          all.put("localDateTime", java.time.LocalDateTime.of(2024, 2, 29, 13, 45, 7, 123456789));
          all.put("localTime", java.time.LocalTime.of(13, 45, 7, 123000000));
          all.put("instant", java.time.Instant.ofEpochMilli(1600000000123L));
          all.put("duration", java.time.Duration.ofMillis(90061001L));
          all.put("uuid", java.util.UUID.fromString("123e4567-e89b-12d3-a456-426614174000"));
          all.put("locale", java.util.Locale.CHINA);
          all.put("character", 'c');
          all.put("short", (short) 7);
          all.put("byte", (byte) -3);
          all.put("float", 1.5f);
          all.put("charArray", new char[] {'h', 'i'});
          all.put("emptyMap", java.util.Collections.emptyMap());
          all.put("unmodifiable", java.util.Collections.unmodifiableList(new ArrayList<>(List.of(1))));
          all.put("listOf", List.of(1, 2));
          all.put("enumSet", java.util.EnumSet.of(Color.RED));
          all.put("enumMap", new java.util.EnumMap<>(Map.of(Color.RED, 1)));
          all.put("concurrent", new java.util.concurrent.ConcurrentHashMap<>(Map.of("c", 1)));
          return all;
        }
      case "throwable":
        return new IllegalStateException(
            "no such user", new IllegalArgumentException("bad id 7"));
      default:
        throw new IllegalArgumentException("no fixture " + name);
    }
  }
}
