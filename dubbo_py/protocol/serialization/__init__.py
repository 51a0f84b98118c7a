"""Serializations dubbo-py speaks to Java Dubbo services (Hessian2 for now)."""
