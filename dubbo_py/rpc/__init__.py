"""Deprecated: the modules of ``dubbo_py.rpc`` moved in 0.2 (see :mod:`dubbo_py.moved`)."""
