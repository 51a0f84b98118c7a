"""Application-level service discovery, as Apache Dubbo 3.3 does it.

Besides (or instead of) one node per service per process under ``/dubbo/<interface>/providers``,
a provider application registers one *instance* node per process under
``/services/<application>/<host:port>``, the *mapping* ``/dubbo/mapping/<interface>`` from each
interface to the applications providing it, and a *metadata* document
``/dubbo/metadata/<application>/<revision>`` describing the services behind a revision. A
consumer reads the mapping, watches the applications' instances, fetches each revision's
metadata once, and builds the same provider URLs the interface level registers.

Modules: :mod:`.paths` (where things live), :mod:`.metadata` (the MetadataInfo document and
its revision), :mod:`.instance` (the instance node's JSON), :mod:`.mapping` (the mapping node
and its conditional-update merge), :mod:`.publisher` (the provider side), :mod:`.discovery`
(the consumer side), :mod:`.migration` (which level a consumer uses).
"""
