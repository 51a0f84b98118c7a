"""``nacos://host:port``: the parts of dubbo-py's registry tree that Dubbo's Nacos layout has,
kept in a real Nacos (2.x or 3.x, gRPC) through ``nacos-sdk-python``'s asyncio API.

Nacos is not a tree. This store maps the nodes Dubbo's Nacos layout names and refuses every
other path with a :class:`StoreError` naming it (never silently):

* ``/dubbo/<interface>/<category>/<url>`` (providers, consumers, configurators, routers;
  ephemeral): an instance of the Nacos service ``<category>:<interface>:<version>:<group>``
  (group ``DEFAULT_GROUP``), ip and port from the URL, metadata the URL's parameters (Dubbo's
  ``NacosRegistry``); listing the folder reads every service of that interface from the server
  and builds each instance's URL back.
* ``/dubbo/config/<group>/<key>``: config data id ``<key>`` in group ``<group>`` (rules in
  ``dubbo``, as Dubbo's ``NacosDynamicConfiguration``).
* ``/dubbo/mapping/<interface>``: data id ``<interface>`` in group ``mapping``.

Nacos has no node versions: :meth:`get` reports 0, :meth:`set` with a version other than -1
is refused. Watches poll (every ``poll_interval`` seconds) on a thread of their own and call
back only on change, which is what Dubbo's NacosRegistry does for the service list too; a
config watch is woken by the server's config-change push, so a rule is read as soon as Nacos
serves it, and polls only every ``config_poll_interval`` seconds against a lost push.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import tempfile
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, StoreError
from dubbo_py.registry.store._paths import validate_path
from dubbo_py.registry.store.base import Cancel, SessionState
from dubbo_py.registry.store.nacos.polled import PolledNode
from dubbo_py.url import URL

if TYPE_CHECKING:
    from dubbo_py.registry.store.address import RegistryAddress

__all__ = ["NacosStore"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
# Dubbo's NacosRegistry names a service per category, configurators and routers included (a
# provider watches its configurators folder): each is ``<category>:<interface>:...``.
_CATEGORIES = ("providers", "consumers", "configurators", "routers")
_NAMING_GROUP = "DEFAULT_GROUP"


def _service_name(url: URL, category: str) -> str:
    """Dubbo's ``NacosServiceName``: ``<category>:<interface>:<version>:<group>``."""
    return ":".join((category, url.service_interface, url.get_str("version"), url.get_str("group")))


def _deregistration(param: Any) -> Any:
    """The deregistration of a registered instance, with the very service, group, cluster and
    ephemerality it was registered with (the SDK's redo cache is keyed by service and group)."""
    import v2.nacos as nacos

    return nacos.DeregisterInstanceParam(
        service_name=param.service_name,
        group_name=param.group_name,
        ip=param.ip,
        port=param.port,
        cluster_name=param.cluster_name,
        ephemeral=param.ephemeral,
    )


_LOOP_LOCK = threading.Lock()
_LOOP: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None


def _wake_config_listener(config_service: Any) -> None:
    """Let the SDK's config listen loop see its stop flag now rather than at its next 5 s poll.

    nacos-sdk-python 3.2.0's config shutdown sets a stop event, then awaits a loop that only
    checks it after ``wait_for(queue.get(), timeout=5)``: every store close (and so every
    application stop on Nacos) took 5 s. Setting the event and queueing a wake-up first ends the
    loop at once. Attributes are looked up defensively: another SDK version just waits as before.
    """
    proxy = getattr(config_service, "grpc_client_proxy", None)
    stop = getattr(proxy, "stop_event", None)
    channel = getattr(proxy, "execute_config_listen_channel", None)
    if isinstance(stop, asyncio.Event) and isinstance(channel, asyncio.Queue):
        stop.set()
        channel.put_nowait(None)


def _listen_now(config_service: Any) -> None:
    """Have the SDK send its config listen request now: nacos-sdk-python 3.2.0's
    ``add_listener`` only marks the data id, and the listen loop registers it with the server at
    its next round (up to 5 s), so a change in those seconds came with no push (one poll late).
    Looked up defensively like :func:`_wake_config_listener`."""
    proxy = getattr(config_service, "grpc_client_proxy", None)
    channel = getattr(proxy, "execute_config_listen_channel", None)
    if isinstance(channel, asyncio.Queue):
        channel.put_nowait(None)


def _shared_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """The one event loop (on a daemon thread) every Nacos store of the process uses: grpc's
    asyncio channels work on a single loop per process, so two stores on two loops would see
    each other's clients "not connected"."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nacos-store", daemon=True)
            thread.start()
            _LOOP = (loop, thread)
        return _LOOP


class NacosStore:
    """The Dubbo-layout subset of the store interface on one Nacos server (see module doc)."""

    @classmethod
    def from_address(
        cls,
        address: RegistryAddress,
        *,
        auth: tuple[str, str] | None = None,
        connect_timeout: float | None = None,
    ) -> NacosStore:
        """The store of a ``nacos://`` address; ``auth`` is a Nacos user and password."""
        if address.chroot:
            raise StoreError(f"{address}: a Nacos registry has no chroot (use a namespace)")
        return cls(address.location, credentials=auth, connect_timeout=connect_timeout or 20.0)

    def __init__(
        self,
        hosts: str,
        *,
        namespace: str = "",
        credentials: tuple[str, str] | None = None,
        connect_timeout: float = 20.0,
        poll_interval: float = 0.5,
        config_poll_interval: float = 5.0,
        work_dir: Path | None = None,
    ) -> None:
        self._hosts = hosts
        self._namespace = namespace
        self._credentials = credentials
        self._connect_timeout = connect_timeout
        self._poll = poll_interval
        # Config watches hear the server's push; their poll only covers a lost push, so it can
        # be slow (every config poll of every process is a request to the server).
        self._config_poll = config_poll_interval
        self._dir = work_dir or Path(tempfile.mkdtemp(prefix="dubbo-py-nacos-client-"))
        self._loop, self._thread = _shared_loop()
        self._naming: Any = None
        self._config: Any = None
        self._listeners: list[Callable[[SessionState], None]] = []
        # One poller per watched node (kind, path), shared by the watches of that node.
        self._watch_lock = threading.Lock()
        self._polled: dict[tuple[str, str], PolledNode] = {}
        self._owned: dict[str, Any] = {}  # ephemeral path -> its RegisterInstanceParam
        self._closed = False
        self._started = False
        # Said once per store, at warning level: what this store cannot do yet must not be a
        # surprise at the first refused path.
        _log.warning(
            "%s: the nacos:// store is a first subset (docs/registry.md, 'Nacos'): "
            "namespace/group address parameters, "
            "application-level discovery and the CLI on Nacos are not supported yet",
            self,
        )

    def __str__(self) -> str:
        return f"nacos://{self._hosts}"

    # ------------------------------------------------------------------ session

    def _client_config(self) -> Any:
        import v2.nacos as nacos  # imported here: only nacos:// addresses need the SDK

        builder = (
            nacos.ClientConfigBuilder()
            .server_address(self._hosts)
            .namespace_id(self._namespace)
            .log_level("WARNING")
            .cache_dir(str(self._dir / "cache"))
            .log_dir(str(self._dir / "log"))
        )
        if self._credentials:
            builder = builder.username(self._credentials[0]).password(self._credentials[1])
        return builder.build()

    def _run(self, coro: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        if self._closed or not self._started:
            coro.close()
            raise StoreError(f"{self} is {'closed' if self._closed else 'not started'}")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout or self._connect_timeout)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"{self}: {type(exc).__name__}: {exc}") from exc

    def start(self, timeout: float | None = None) -> bool:
        """Connect the naming and config clients (both gRPC to the server's port + 1000)."""
        import v2.nacos as nacos

        if self._started:
            return True
        self._started = True

        async def connect() -> None:
            config = self._client_config()
            self._naming = await nacos.NacosNamingService.create_naming_service(config)
            self._config = await nacos.NacosConfigService.create_config_service(config)

        try:
            self._run(connect(), timeout)
        except StoreError as exc:
            _log.warning("%s: could not connect: %s", self, exc)
            return False
        for listener in list(self._listeners):
            listener(SessionState.CONNECTED)
        return True

    def close(self) -> None:
        """Deregister this store's instances and shut both clients down."""
        if self._closed or not self._started:
            self._closed = True
            return

        async def shutdown() -> None:

            for param in self._owned.values():
                try:
                    await self._naming.deregister_instance(_deregistration(param))
                except Exception as exc:  # the server forgets it with the connection anyway
                    _log.warning("%s: deregistering %s: %s", self, param.service_name, exc)
            if self._config is not None:
                _wake_config_listener(self._config)
            for client in (self._naming, self._config):
                if client is not None:
                    await client.shutdown()

        try:
            self._run(shutdown())
        except StoreError as exc:
            # Closing never fails the caller: after the server was lost and came back, the
            # SDK's shutdown can end cancelled (its reconnection tasks are torn down with it).
            _log.warning("%s: closing: %s", self, exc)
        finally:
            self._closed = True
            with self._watch_lock:
                polled = list(self._polled.values())
                self._polled.clear()
            for node in polled:
                node.wake.set()  # its poller sees the store closed now, not after a poll

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Told CONNECTED once started (the SDK reconnects and re-registers on its own)."""
        self._listeners.append(listener)
        if self._started and not self._closed:
            listener(SessionState.CONNECTED)

    # ------------------------------------------------------------------ path mapping

    def _config_key(self, path: str) -> tuple[str, str] | None:
        """``(data id, group)`` of a config or mapping node; None for another path."""
        parts = validate_path(path).split("/")[1:]
        if len(parts) == 4 and parts[:2] == ["dubbo", "config"]:
            return parts[3], parts[2]
        if len(parts) == 3 and parts[:2] == ["dubbo", "mapping"]:
            return parts[2], "mapping"
        return None

    def _category(self, path: str) -> tuple[str, str] | None:
        """``(interface, category)`` of a providers/consumers folder; None otherwise."""
        parts = validate_path(path).split("/")[1:]
        if len(parts) == 3 and parts[0] == "dubbo" and parts[2] in _CATEGORIES:
            return parts[1], parts[2]
        return None

    def _refuse(self, path: str, what: str) -> StoreError:
        return StoreError(
            f"{self}: {what} {path!r} has no place in Dubbo's Nacos layout (service instances "
            "under /dubbo/<interface>/providers|consumers, config under /dubbo/config/<group>, "
            "mapping under /dubbo/mapping): docs/registry.md, Nacos"
        )

    # ------------------------------------------------------------------ config

    async def _read(self, data_id: str, group: str) -> str | None:
        import v2.nacos as nacos

        text = await self._config.get_config(nacos.ConfigParam(data_id=data_id, group=group))
        return text or None  # Nacos has no empty config: "" is absent

    def get(self, path: str) -> tuple[bytes, int]:
        """A config node's content (version 0: Nacos keeps none). :class:`NoNodeError`."""
        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "reading")
        text = self._run(self._read(*key))
        if text is None:
            raise NoNodeError(f"node {path} does not exist in {self}")
        return text.encode(), 0

    def _publish(self, path: str, data: bytes) -> None:
        import v2.nacos as nacos

        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "writing")
        if not data:
            raise StoreError(f"{self}: Nacos keeps no empty config ({path})")
        ok = self._run(
            self._config.publish_config(
                nacos.ConfigParam(data_id=key[0], group=key[1], content=data.decode())
            )
        )
        if not ok:
            raise StoreError(f"{self}: Nacos refused to publish {path}")

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Publish a config node's new content. Versions other than -1 are refused."""
        if version != -1:
            raise BadVersionError(f"{self}: Nacos has no node versions (set {path} v{version})")
        if not self.exists(path):
            raise NoNodeError(f"node {path} does not exist in {self}")
        self._publish(path, data)
        return 0

    def exists(self, path: str) -> bool:
        """Whether a config node has content; a providers/consumers folder always exists."""
        if self._category(path) is not None:
            return True
        if path in self._owned:
            return True
        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "checking")
        return self._run(self._read(*key)) is not None

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        makepath: bool = True,
        protected: bool = False,
    ) -> None:
        """Publish a config node, or register a provider/consumer URL as an instance."""
        del makepath  # Nacos has no parents
        if protected:
            raise StoreError(f"{self}: protected nodes need Nacos's own auth ({path})")
        head, _, name = validate_path(path).rpartition("/")
        category = self._category(head)
        if category is not None:
            self._register(path, category[1], name)
            return
        if self.exists(path):
            raise NodeExistsError(f"node {path} already exists in {self}")
        if ephemeral:
            raise StoreError(f"{self}: config nodes cannot be ephemeral in Nacos ({path})")
        self._publish(path, data)

    def ensure_path(self, path: str) -> None:
        """Folders need no creating in Nacos; a config node absent is refused (no empty
        config)."""
        if self._category(path) is not None or path in ("/", "/dubbo", "/dubbo/config"):
            return
        if not self.exists(path):
            raise self._refuse(path, "creating an empty")

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Remove a config node or deregister one of this store's instances."""
        import v2.nacos as nacos

        del recursive
        if version != -1:
            raise BadVersionError(f"{self}: Nacos has no node versions (delete {path})")
        param = self._owned.pop(path, None)
        if param is not None:
            self._run(self._naming.deregister_instance(_deregistration(param)))
            return
        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "deleting")
        if not self.exists(path):
            raise NoNodeError(f"node {path} does not exist in {self}")
        self._run(self._config.remove_config(nacos.ConfigParam(data_id=key[0], group=key[1])))

    # ------------------------------------------------------------------ instances

    def _register(self, path: str, category: str, name: str) -> None:
        import v2.nacos as nacos

        if path in self._owned:
            raise NodeExistsError(f"node {path} already exists in {self}")
        url = URL.decode(name)
        metadata = dict(url.parameters)
        metadata.setdefault("protocol", url.protocol)
        metadata.setdefault("path", url.path)
        param = nacos.RegisterInstanceParam(
            service_name=_service_name(url, category),
            group_name=_NAMING_GROUP,
            ip=url.host,
            port=url.port,
            weight=float(url.get_int("weight", 100)),
            metadata=metadata,
        )
        self._run(self._naming.register_instance(param))
        self._owned[path] = param

    async def _urls(self, interface: str, category: str) -> list[str]:
        import v2.nacos as nacos

        prefix = f"{category}:{interface}:"
        names: list[str] = []
        page = 1
        while True:
            listed = await self._naming.list_services(
                nacos.ListServiceParam(
                    # Nacos 3 lists nothing for "": the default namespace is named "public"
                    namespace_id=self._namespace or "public",
                    group_name=_NAMING_GROUP,
                    page_no=page,
                    page_size=500,
                )
            )
            services = list(listed.services or [])
            names += [s for s in services if s.startswith(prefix)]
            if len(services) < 500:
                break
            page += 1
        urls: list[str] = []
        for service in names:
            # Asked of the server each time, not through list_instances: that subscribes
            # (even with subscribe=False) and then answers from the SDK's subscription cache,
            # which against Nacos 3.1 kept a deregistered instance for good (the server's own
            # list was already empty): a provider leaving was never seen.
            info = await self._naming.grpc_client_proxy.query_instance_of_service(
                service, _NAMING_GROUP, "", False
            )
            for inst in info.hosts if info is not None else []:
                if not (inst.healthy and inst.enabled and inst.weight > 0):
                    continue
                meta = dict(inst.metadata or {})
                protocol = meta.pop("protocol", "tri") or "tri"
                path = meta.pop("path", interface) or interface
                urls.append(URL(protocol, inst.ip, int(inst.port), path, parameters=meta).encode())
        return sorted(set(urls))

    def children(self, path: str) -> list[str]:
        """The URLs registered under a providers/consumers folder, built from the instances
        of every Nacos service of that interface."""
        category = self._category(path)
        if category is None:
            raise self._refuse(path, "listing")
        return self._run(self._urls(*category))

    # ------------------------------------------------------------------ watches

    def _watch(
        self,
        key: tuple[str, str],
        read: Callable[[], Coroutine[Any, Any, Any]],
        report: Callable[[Any], None],
        on_first: Callable[[threading.Event], Callable[[], None]] | None = None,
        interval: float | None = None,
    ) -> Cancel:
        """Watch ``key`` (kind, path): the watches of one node share one poller
        (:class:`PolledNode`). ``on_first`` runs when a poller is made, with its wake event,
        and returns what to do when its last watch leaves (a config watch's push listener)."""
        if self._closed or not self._started:
            raise StoreError(f"{self} is {'closed' if self._closed else 'not started'}")
        while True:
            with self._watch_lock:
                node = self._polled.get(key)
                made = node is None or node.finished
                if node is None or made:
                    node = PolledNode(
                        f"{self}{key[1]}",
                        lambda: self._run(read()),
                        self._poll if interval is None else interval,
                        self._alive,
                    )
                    node.at_idle(functools.partial(self._forget, key, node))
                    self._polled[key] = node
            if made and on_first is not None:
                node.at_idle(on_first(node.wake))
            try:
                return node.add(report)
            except StoreError:
                continue  # it went idle between the lookup and the add: make a fresh one

    def _alive(self) -> bool:
        return not self._closed

    def _forget(self, key: tuple[str, str], node: PolledNode) -> None:
        with self._watch_lock:
            if self._polled.get(key) is node:
                del self._polled[key]

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Poll a providers/consumers folder's URLs; called on change."""
        category = self._category(path)
        if category is None:
            raise self._refuse(path, "watching")
        return self._watch(("children", path), lambda: self._urls(*category), callback)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Poll a config node; ``(None, -1)`` while absent."""
        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "watching")

        def report(text: str | None) -> None:
            callback(None, -1) if text is None else callback(text.encode(), 0)

        data_id, group = key

        def listen(wake: threading.Event) -> Callable[[], None]:
            # The SDK's config listener hears the server's change push; it only wakes the
            # poller, which reads the server itself (the push's content is not trusted to be
            # the latest, and a lost push costs one poll interval, not the change).
            async def on_change(*_pushed: Any) -> None:
                wake.set()

            async def add() -> None:
                await self._config.add_listener(data_id, group, on_change)
                _listen_now(self._config)

            self._run(add())

            def remove() -> None:
                if not self._closed:
                    try:
                        self._run(self._config.remove_listener(data_id, group, on_change))
                    except StoreError as exc:
                        _log.debug("%s: config listener not removed: %s", self, exc)

            return remove

        return self._watch(
            ("data", path), lambda: self._read(*key), report, listen, self._config_poll
        )
