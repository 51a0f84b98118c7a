"""Deprecated path of :mod:`dubbo_py.registry.store.zookeeper`;
see :mod:`dubbo_py.moved`."""

from dubbo_py.moved import alias

__getattr__ = alias(__name__, "dubbo_py.registry.store.zookeeper")
