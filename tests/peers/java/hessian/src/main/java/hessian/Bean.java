package hessian;

import java.io.Serializable;
import java.math.BigDecimal;
import java.util.Date;
import java.util.List;
import java.util.Map;

/** A Java bean with a field of every kind a Dubbo service's parameter has. */
public class Bean implements Serializable {
  private static final long serialVersionUID = 1L;

  public String name;
  public int age;
  public long id;
  public double score;
  public boolean active;
  public Date born;
  public BigDecimal balance;
  public byte[] avatar;
  public List<String> tags;
  public Map<String, Integer> counts;
  public Color color;
  public Bean friend;
}
