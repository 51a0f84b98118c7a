"""Registry stores: the contract every backend keeps (:mod:`.base`) and the backends themselves
(ZooKeeper, etcd, the embedded sqlite store), chosen from an address by :mod:`.address`.

The contract's names are re-exported here, so ``dubbo_py.registry.store.base.Store`` is the store
interface wherever the docs name it.
"""

from dubbo_py.registry.store.base import CHANGE, AccessControlled, NodeAccess, SessionState, Store

__all__ = ["CHANGE", "AccessControlled", "NodeAccess", "SessionState", "Store"]
