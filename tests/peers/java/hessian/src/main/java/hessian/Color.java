package hessian;

/** An enum, sent by hessian-lite as an object with one field, {@code name}. */
public enum Color {
  RED,
  GREEN,
  BLUE
}
