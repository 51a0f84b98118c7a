package estate;

import java.math.BigDecimal;
import java.util.Date;
import java.util.List;
import java.util.Map;

/** A Java-interface service (no IDL), exported over dubbo:// with Hessian2 by DubboProvider. */
public interface UserService {
    /** The user with this id; id 0 throws IllegalArgumentException caused by an IllegalStateException. */
    User getUser(Long id);

    /** The bean as it arrived, with its name upper-cased: a bean both ways. */
    User save(User user);

    /** A summary of what arrived, so that a test sees the Java types the arguments became. */
    Map<String, Object> describe(List<Object> items, Map<String, Object> map, Date when, BigDecimal amount);

    /** null, to see Java's null come back. */
    String nothing();

    /** The sum of the ints, as a long. */
    long sum(int[] values);

    /** "String:" and the text: one of two overloads, which a caller picks by parameter types. */
    String kind(String text);

    /** "long:" and the number: the other overload. */
    String kind(long number);

    /** The call's attachment of this key as the provider received it (null when absent). */
    String attachment(String key);

    /** Sleeps this many milliseconds, then returns them. */
    int sleep(int millis);
}
