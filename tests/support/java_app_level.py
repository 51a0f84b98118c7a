"""Application-level nodes exactly as Apache Dubbo 3.3 (Java) writes them to ZooKeeper.

The documents are spelled out by hand from Dubbo's sources and documentation (Curator's
``ServiceInstance`` JSON with the ``ZookeeperInstance`` payload, the ``MetadataInfo`` JSON,
the comma-separated mapping), not produced by dubbo-py's own writers, so tests that read them
check dubbo-py against Java's format rather than against itself.
"""

from __future__ import annotations

import json

from dubbo_py.errors import NodeExistsError
from dubbo_py.registry.store.base import Store

#: ``get /services/first-dubbo-provider/30.221.146.35:20880`` from Dubbo's documentation.
DOCUMENTED_INSTANCE = (
    '{"name":"first-dubbo-provider","id":"30.221.146.35:20880","address":"30.221.146.35",'
    '"port":20880,"sslPort":null,"payload":{"@class":'
    '"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":"30.221.146.35:20880",'
    '"name":"first-dubbo-provider","metadata":{"dubbo.endpoints":'
    '"[{\\"port\\":20880,\\"protocol\\":\\"dubbo\\"}]","dubbo.metadata-service.url-params":'
    '"{\\"connections\\":\\"1\\",\\"version\\":\\"1.0.0\\",\\"dubbo\\":\\"2.0.2\\",'
    '\\"release\\":\\"3.1.4\\",\\"side\\":\\"provider\\",\\"port\\":\\"20880\\",'
    '\\"protocol\\":\\"dubbo\\"}","dubbo.metadata.revision":"871fbc9cb2730caea9b0d858852d5ede",'
    '"dubbo.metadata.storage-type":"local","timestamp":"1674960780647"}},'
    '"registrationTimeUTC":1674960781893,"serviceType":"DYNAMIC","uriSpec":null}'
)


def java_instance(
    app: str,
    host: str,
    port: int,
    revision: str,
    *,
    storage: str = "remote",
    ts: int = 1,
    metadata_port: int | None = None,
    meta_v: str = "2.0.0",
) -> str:
    """An instance node's data as Curator serializes Dubbo's instance (field order included);
    ``metadata_port`` adds the MetadataService's url-params (what a ``local`` instance has)."""
    iid = f"{host}:{port}"
    endpoints = json.dumps(f'[{{"port":{port},"protocol":"tri"}}]')
    url_params = ""
    if metadata_port is not None:
        params = (
            f'{{"connections":"1","version":"{meta_v}","dubbo":"2.0.2","release":"3.3.0",'
            f'"side":"provider","port":"{metadata_port}","protocol":"tri"}}'
        )
        url_params = f'"dubbo.metadata-service.url-params":{json.dumps(params)},'
    return (
        f'{{"name":"{app}","id":"{iid}","address":"{host}","port":{port},"sslPort":null,'
        f'"payload":{{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance",'
        f'"id":"{iid}","name":"{app}","metadata":{{"dubbo.endpoints":{endpoints},'
        f"{url_params}"
        f'"dubbo.metadata.revision":"{revision}","dubbo.metadata.storage-type":"{storage}",'
        f'"meta-v":"{meta_v}","timestamp":"{ts}"}}}},'
        f'"registrationTimeUTC":{ts},"serviceType":"DYNAMIC","uriSpec":null}}'
    )


def java_metadata(
    app: str, revision: str, interface: str, *, version: str = "", port: int = -1
) -> str:
    """A MetadataInfo document as Java's metadata report stores it (one Triple service)."""
    key = f"{interface}:{version}:tri" if version else f"{interface}:tri"
    version_field = f'"version":"{version}",' if version else ""
    version_param = f'"version":"{version}",' if version else ""
    return (
        f'{{"app":"{app}","revision":"{revision}","services":{{"{key}":{{'
        f'"name":"{interface}",{version_field}"protocol":"tri","port":{port},'
        f'"path":"{interface}","params":{{"side":"provider","release":"3.3.0",'
        f'"methods":"SayHello,SayHelloStream","deprecated":"false","dubbo":"2.0.2",'
        f'"interface":"{interface}",{version_param}"service-name-mapping":"true",'
        f'"generic":"false","application":"{app}","dynamic":"true","anyhost":"true",'
        f'"prefer.serialization":"hessian2,fastjson2","timeout":"3000"}}}}}}}}'
    )


def write_java_provider(
    store: Store,
    app: str,
    host: str,
    port: int,
    interface: str,
    *,
    version: str = "",
    revision: str = "6f1c1f3a2bc0c8d9e0a1b2c3d4e5f607",
    storage: str = "remote",
) -> str:
    """Write a Java provider application's nodes (instance, mapping, remote metadata) for one
    Triple service served at ``host:port``; returns the instance node's path."""
    mapping = f"/dubbo/mapping/{interface}"
    try:
        store.create(mapping, app.encode(), makepath=True)
    except NodeExistsError:
        data, ver = store.get(mapping)
        if app not in data.decode().split(","):
            store.set(mapping, f"{data.decode()},{app}".encode(), ver)
    meta = f"/dubbo/metadata/{app}/{revision}"
    if not store.exists(meta):
        store.create(meta, java_metadata(app, revision, interface, version=version).encode())
    path = f"/services/{app}/{host}:{port}"
    store.create(
        path, java_instance(app, host, port, revision, storage=storage).encode(), ephemeral=True
    )
    return path
