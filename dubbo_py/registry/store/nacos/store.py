"""``nacos://host:port``: the parts of dubbo-py's registry tree that Dubbo's Nacos layout has,
kept in a real Nacos (2.x or 3.x, gRPC) through ``nacos-sdk-python``'s asyncio API.

Nacos is not a tree. This store maps the nodes Dubbo's Nacos layout names and refuses every
other path with a :class:`StoreError` naming it (never silently):

* ``/dubbo/<interface>/<category>/<url>`` (providers, consumers, configurators, routers;
  ephemeral): an instance of the Nacos service ``<category>:<interface>:<version>:<group>``
  (in the naming group: the address's ``group``, ``DEFAULT_GROUP`` without one, as Dubbo's
  ``NacosRegistry`` and ``NacosServiceDiscovery`` read it), ip and port from the URL,
  metadata the URL's parameters (Dubbo's ``NacosRegistry``); listing the folder reads every
  service of that interface from the server and builds each instance's URL back.
* ``/dubbo/config/<group>/<key>``: config data id ``<key>`` in group ``<group>`` (rules in
  ``dubbo``, as Dubbo's ``NacosDynamicConfiguration``).
* ``/dubbo/mapping/<interface>``: data id ``<interface>`` in group ``mapping``.
* Application-level discovery (:mod:`.applevel`): ``/services/<app>/<host:port>`` (ephemeral)
  is an instance of the Nacos service ``<app>`` (in the naming group) whose metadata is the
  instance's, read back as Curator's JSON; ``/dubbo/metadata/<app>/<revision>`` is data id
  ``<app>`` in group ``<revision>`` (Dubbo's ``NacosServiceDiscovery`` and
  ``NacosMetadataReport``).
* ``/dubbo/config-history/<key>`` (the CLI's rule history, :mod:`dubbo_py.admin.rules.history`):
  data id ``<key>`` in group ``dubbo-history`` holds the counter, and each entry
  ``/dubbo/config-history/<key>/<seq>`` is data id ``<key>.<seq>`` in group
  ``dubbo-history-entries``.

The naming group is the only thing the address's ``group`` changes: config (rules, the mapping,
MetadataInfo documents, the history) stays in the groups above, where Dubbo 3.3 reads it
whatever its registry's group (its rule listeners name group ``dubbo`` themselves; see
docs/compatibility.md, Nacos).

Nacos keeps no node version counter. A node's version here is the first 48 bits of the MD5 of
its content (what Nacos itself compares): :meth:`set` with a version is a compare-and-set on
that MD5, done by the server (``casMd5``). So a version changes when the content does, and
only then (writing the same text again keeps it), and it does not count up. A versioned delete
is checked, then done (Nacos removes config without a CAS). Listing a config folder (the rules
of group ``dubbo``, the history) asks the server's admin HTTP API
(``/nacos/v3/admin/cs/config/list``): the gRPC client has no listing.

Watches poll (every ``poll_interval`` seconds) on a thread of their own and call back only on
change, which is what Dubbo's NacosRegistry does for the service list too; a config watch is
handed the content the client queries on the server's config-change notice (one query per
notice and process, :func:`_query_on_notice`), so a rule is applied as soon as Nacos serves it,
and polls only every ``config_poll_interval`` seconds against a lost push.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import re
import shutil
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dubbo_py.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotInLayoutError,
    StoreError,
)
from dubbo_py.registry.application.instance import InstanceError
from dubbo_py.registry.application.paths import METADATA_ROOT, SERVICES_ROOT
from dubbo_py.registry.store._paths import validate_path
from dubbo_py.registry.store.base import Cancel, SessionState
from dubbo_py.registry.store.nacos import applevel
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
#: Nacos's default group: the naming group of an address without ``group=`` (Dubbo's
#: ``getUrl().getGroup(DEFAULT_GROUP)``).
DEFAULT_NAMING_GROUP = "DEFAULT_GROUP"
# Nacos's own check of a group name (ParamUtils: letters, digits, "-", "_", ".", ":"), made here
# so a bad one is refused when the address is opened, naming it, not at the first register.
_GROUP_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
#: The config groups of the CLI's rule history (counter per key; one data id per entry).
HISTORY_GROUP = "dubbo-history"
HISTORY_ENTRY_GROUP = "dubbo-history-entries"
_HISTORY_GROUPS = frozenset({HISTORY_GROUP, HISTORY_ENTRY_GROUP})
_PAGE = 500
# How many config nodes' last written content a store keeps for :meth:`NacosStore.overwrite`.
_WRITTEN_KEPT = 256


def content_version(text: str) -> int:
    """The version this store reports for config content: the first 48 bits of its MD5 (the
    digest Nacos keeps and compares), an int JSON and every client read exactly."""
    return int(hashlib.md5(text.encode()).hexdigest()[:12], 16)


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


def _query_on_notice(config_service: Any) -> None:
    """Answer the server's config change notice with one query, not a listen request and then
    the query.

    nacos-sdk-python 3.2.0 hears a notice (data id, group, no content), marks the data id out of
    sync and wakes its listen loop, which sends a batch listen request (which data ids changed?)
    and then queries each changed one: two requests in turn per notice, while the notice already
    names what changed. Here a notice of a listened data id is answered by querying it at once
    and handing the content to the SDK's subscription cache (which calls the listeners on a new
    MD5, as after its own query). Notices of one data id are queried one after another, and a
    notice that comes in while a query is out is answered by one more query after it, so the
    last query always starts after the last notice. A query that fails leaves the data id to
    the SDK's own way (listen, then query). Looked up defensively like
    :func:`_wake_config_listener`: another SDK version keeps its own way.
    """
    proxy = getattr(config_service, "grpc_client_proxy", None)
    manager = getattr(proxy, "config_subscribe_manager", None)
    notified = getattr(manager, "notify_config_changed", None)
    query = getattr(proxy, "query_config", None)
    update = getattr(manager, "update_subscribe_cache", None)
    subscribed = getattr(manager, "subscribe_cache_map", None)
    if not (callable(notified) and callable(query) and callable(update)):
        return
    if manager is None or not isinstance(subscribed, dict):
        return
    from v2.nacos.config.util.config_client_util import get_config_cache_key

    # data id key -> whether another notice came in while its query was out
    again: dict[str, bool] = {}
    tasks: set[asyncio.Task[None]] = set()

    async def refresh(data_id: str, group: str, tenant: str, key: str) -> None:
        try:
            while again.get(key):
                again[key] = False
                try:
                    content, encrypted = await query(data_id, group)
                except Exception as exc:  # "being modified", a lost connection...
                    _log.debug("config %s: query on notice failed (%s): listening", key, exc)
                    await notified(data_id, group, tenant)
                    continue
                await update(data_id, group, tenant, content, encrypted)
        finally:
            again.pop(key, None)

    async def on_notice(data_id: str, group: str, tenant: str) -> None:
        key = get_config_cache_key(data_id, group, tenant)
        if key not in subscribed:
            return  # nobody listens (as the SDK's own handling)
        if key in again:  # a query is out: one more after it
            again[key] = True
            return
        again[key] = True
        # A task: the SDK awaits this before acknowledging the notice, and handles the
        # server's requests one at a time.
        task = asyncio.ensure_future(refresh(data_id, group, tenant, key))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    manager.notify_config_changed = on_notice


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
        group = address.option("group") or DEFAULT_NAMING_GROUP
        if not _GROUP_NAME.fullmatch(group):
            raise StoreError(
                f"{address}: group={group!r} is no Nacos group name (letters, digits, '-', '_', "
                "'.', ':'; at most 128)"
            )
        return cls(
            address.location,
            namespace=address.option("namespace") or "",
            group=group,
            credentials=auth,
            connect_timeout=connect_timeout or 20.0,
        )

    def __init__(
        self,
        hosts: str,
        *,
        namespace: str = "",
        group: str = DEFAULT_NAMING_GROUP,
        credentials: tuple[str, str] | None = None,
        connect_timeout: float = 20.0,
        poll_interval: float = 0.5,
        config_poll_interval: float = 5.0,
        work_dir: Path | None = None,
    ) -> None:
        self._hosts = hosts
        self._namespace = namespace
        # The naming group of every instance this store registers and reads (interface and
        # application level alike); config groups do not depend on it (module doc).
        self._group = group
        self._credentials = credentials
        # Whether the server refused the identity but has auth off (it is then not used).
        self._anonymous = False
        self._connect_timeout = connect_timeout
        self._poll = poll_interval
        # Config watches hear the server's push; their poll only covers a lost push, so it can
        # be slow (every config poll of every process is a request to the server).
        self._config_poll = config_poll_interval
        # The SDK's cache and log folders: a temporary one of our own unless given, made when
        # the clients start and removed at close (one per store, so a process that opens and
        # closes stores does not fill the temporary directory).
        self._given_dir = work_dir
        self._own_dir: Path | None = None
        self._loop, self._thread = _shared_loop()
        self._naming: Any = None
        self._config: Any = None
        self._listeners: list[Callable[[SessionState], None]] = []
        # One poller per watched node (kind, path), shared by the watches of that node.
        self._watch_lock = threading.Lock()
        self._polled: dict[tuple[str, str], PolledNode] = {}
        self._owned: dict[str, Any] = {}  # ephemeral path -> its RegisterInstanceParam
        # Config path -> the content this store last published there (the newest first out at
        # _WRITTEN_KEPT): what an overwrite compares-and-sets against, instead of reading first.
        self._written: dict[str, str] = {}
        # Per thread: app -> the instance read a watch of it is being told of (_watch_app).
        self._telling = threading.local()
        self._closed = False
        self._started = False
        # Said once per store, at warning level: what this store cannot do must not be a
        # surprise at the first refused path.
        _log.warning(
            "%s: the nacos:// store is a subset (docs/registry.md, 'Nacos'): paths outside "
            "Dubbo's Nacos layout are refused",
            self,
        )

    def content_version(self, data: bytes) -> int:
        """The version of a node just written with ``data`` (:func:`content_version`)."""
        return content_version(data.decode())

    @property
    def naming_group(self) -> str:
        """The Nacos group of this store's service instances (the address's ``group``)."""
        return self._group

    def __str__(self) -> str:
        query = [f"namespace={self._namespace}"] if self._namespace else []
        if self._group != DEFAULT_NAMING_GROUP:
            query.append(f"group={self._group}")
        return f"nacos://{self._hosts}{'?' if query else ''}{'&'.join(query)}"

    # ------------------------------------------------------------------ session

    def _work_dir(self) -> Path:
        if self._given_dir is not None:
            return self._given_dir
        if self._own_dir is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="dubbo-py-nacos-client-"))
        return self._own_dir

    def _client_config(self) -> Any:
        import v2.nacos as nacos  # imported here: only nacos:// addresses need the SDK

        work_dir = self._work_dir()
        builder = (
            nacos.ClientConfigBuilder()
            .server_address(self._hosts)
            .namespace_id(self._namespace)
            .log_level("WARNING")
            .cache_dir(str(work_dir / "cache"))
            .log_dir(str(work_dir / "log"))
        )
        if self._credentials and not self._anonymous:
            # (Not when the server refused them with auth off: the SDK would ask for a token
            # before every config call, and fail it.)
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
        """Connect the naming and config clients (both gRPC to the server's port + 1000).
        Returns whether they connected; raises StoreError (naming the address and the user,
        never the password) when the store has an identity and Nacos refuses its login."""
        import v2.nacos as nacos

        if self._started:
            return True
        if self._credentials:
            # The SDK takes a refused login for a passing failure: it logs it from a task of
            # its own and connects without a token, so every call is then refused one by one.
            # Logging in first makes a wrong password one error, at start.
            self._check_login()
        self._started = True

        async def connect() -> None:
            config = self._client_config()
            self._naming = await nacos.NacosNamingService.create_naming_service(config)
            self._config = await nacos.NacosConfigService.create_config_service(config)
            _query_on_notice(self._config)

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
            self._remove_own_dir()
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
            self._remove_own_dir()

    def _remove_own_dir(self) -> None:
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

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
        metadata = applevel.metadata_key(path)
        if metadata is not None:
            return metadata
        if len(parts) == 3 and parts[:2] == ["dubbo", "mapping"]:
            return parts[2], "mapping"
        if len(parts) == 3 and parts[:2] == ["dubbo", "config-history"]:
            return parts[2], HISTORY_GROUP
        if len(parts) == 4 and parts[:2] == ["dubbo", "config-history"] and parts[3].isdigit():
            return f"{parts[2]}.{parts[3]}", HISTORY_ENTRY_GROUP
        return None

    def _config_folder(self, path: str) -> tuple[str, str] | None:
        """``(group, data id prefix)`` of a folder of config nodes; None for another path."""
        parts = validate_path(path).split("/")[1:]
        if len(parts) == 3 and parts[:2] == ["dubbo", "config"]:
            return parts[2], ""
        if parts == ["dubbo", "mapping"]:
            return "mapping", ""
        if parts == ["dubbo", "config-history"]:
            return HISTORY_GROUP, ""
        if len(parts) == 3 and parts[:2] == ["dubbo", "config-history"]:
            return HISTORY_ENTRY_GROUP, parts[2] + "."
        return None

    def _category(self, path: str) -> tuple[str, str] | None:
        """``(interface, category)`` of a providers/consumers folder; None otherwise."""
        parts = validate_path(path).split("/")[1:]
        if len(parts) == 3 and parts[0] == "dubbo" and parts[2] in _CATEGORIES:
            return parts[1], parts[2]
        return None

    def _refuse(self, path: str, what: str) -> NotInLayoutError:
        return NotInLayoutError(
            f"{self}: {what} {path!r} has no place in Dubbo's Nacos layout (service instances "
            "under /dubbo/<interface>/providers|consumers, config under /dubbo/config/<group>, "
            "mapping under /dubbo/mapping, application instances under /services/<app>, "
            "metadata under /dubbo/metadata/<app>/<revision>): docs/registry.md, Nacos"
        )

    # ------------------------------------------------------------------ config

    async def _read(self, data_id: str, group: str) -> str | None:
        import v2.nacos as nacos

        text: Any = await self._config.get_config(nacos.ConfigParam(data_id=data_id, group=group))
        if isinstance(text, tuple):
            # When the server answers "being modified" (a read racing a publish, code 400) the
            # SDK returns its local cache entry, a (content, encrypted key) pair, not the text
            # (seen right after a publish with auth on).
            text = text[0]
        return str(text) if text else None  # Nacos has no empty config: "" is absent

    def _current(self, path: str) -> tuple[str, str, str]:
        """``(data id, group, content)`` of an existing config node; :class:`NoNodeError`."""
        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "reading")
        text = self._run(self._read(*key))
        if text is None:
            raise NoNodeError(f"node {path} does not exist in {self}")
        return key[0], key[1], text

    def get(self, path: str) -> tuple[bytes, int]:
        """A config node's content and version (:func:`content_version`), or an application
        instance's document. :class:`NoNodeError`."""
        instance = applevel.instance_of(path)
        if instance is not None:
            doc = self._instances_now(instance[0]).get(instance[1])
            if doc is None:
                raise NoNodeError(f"node {path} does not exist in {self}")
            return doc.encode(), content_version(doc)
        _, _, text = self._current(path)
        return text.encode(), content_version(text)

    def _publish(
        self, path: str, data: bytes, cas_md5: str = "", before: str | None = None
    ) -> None:
        import v2.nacos as nacos

        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "writing")
        if not data:
            raise StoreError(f"{self}: Nacos keeps no empty config ({path})")
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise StoreError(f"{self}: Nacos config is text, {path} is not UTF-8") from None
        param = nacos.ConfigParam(data_id=key[0], group=key[1], content=text, cas_md5=cas_md5)
        try:
            ok = self._run(self._config.publish_config(param))
        except StoreError:
            if cas_md5:  # the server refuses a lost compare-and-set with an error
                raise BadVersionError(f"{self}: {path} changed since it was read") from None
            raise
        if not ok:
            if cas_md5:
                raise BadVersionError(f"{self}: {path} changed since it was read")
            raise StoreError(f"{self}: Nacos refused to publish {path}")
        self._written.pop(path, None)
        self._written[path] = text
        if len(self._written) > _WRITTEN_KEPT:
            del self._written[next(iter(self._written))]
        self._settle(path, key, text, before)

    def _settle(
        self, path: str, key: tuple[str, str], text: str | None, before: str | None
    ) -> None:
        """Wait until the server's reads no longer give ``before`` (the content the write
        replaced): they give what was just written (or nothing after a removal), or a later
        writer's content (this write landed and was replaced). Nacos answers config reads from
        a cache it refreshes after the write is stored, so a read right after a publish gave
        the old content: a store must read its own writes (the CLI's history counter and every
        create-then-get rely on it)."""

        async def until() -> None:
            for _ in range(500):
                now = await self._read(*key)
                if now == text or now != before:
                    return
                await asyncio.sleep(0.01)
            raise StoreError(f"{self}: {path} written but not readable after 5 s")

        self._run(until(), max(self._connect_timeout, 10.0))

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Publish a config node's new content; with a version, only while the content is
        still the one of that version (a compare-and-set on its MD5, by the server); or
        register one of this store's application instances again with a new document."""
        if applevel.instance_of(path) is not None:
            return self._update_instance(path, data, version)
        _, _, current = self._current(path)
        cas = ""
        if version != -1:
            if content_version(current) != version:
                raise BadVersionError(
                    f"{self}: {path} is at version {content_version(current)}, not {version}"
                )
            cas = hashlib.md5(current.encode()).hexdigest()
        self._publish(path, data, cas, before=current)
        return content_version(data.decode())

    def overwrite(self, path: str, data: bytes) -> int:
        """Create a config node or replace its content, whatever it is (what
        :meth:`Registry.put_config` without a version asks): Nacos's publish does both.

        :meth:`set` reads the node first (it must refuse an absent one, and its wait for the
        write to be readable needs the content it replaces); so did an overwrite, one request
        more before every rule push. Here a node this store last wrote is published as a
        compare-and-set against that content: when it succeeds, that was the content replaced,
        in one request. When it does not (another writer came in between), or the store has
        not written the node, the node is read first as by :meth:`set`."""
        key = self._config_key(path)
        if key is None or applevel.instance_of(path) is not None:
            raise self._refuse(path, "writing")
        known = self._written.get(path)
        if known is not None:
            try:
                self._publish(path, data, hashlib.md5(known.encode()).hexdigest(), before=known)
                return content_version(data.decode())
            except BadVersionError:
                pass  # changed by another writer (or the request failed): read, as below
        before = self._run(self._read(*key))
        self._publish(path, data, before=before)
        return content_version(data.decode())

    def exists(self, path: str) -> bool:
        """Whether a config node has content; a providers/consumers folder always exists."""
        if self._category(path) is not None or path in self._owned:
            return True
        instance = applevel.instance_of(path)
        if instance is not None:
            return instance[1] in self._instances_now(instance[0])
        if path == SERVICES_ROOT or applevel.application_of(path) is not None:
            return True  # folders of instances need no creating
        key = self._config_key(path)
        if key is not None:  # a history key is a node (its counter) and a folder: the node
            return self._run(self._read(*key)) is not None
        if self._config_folder(path) is not None:
            return True
        parts = path.split("/")[1:]
        if parts in (["dubbo"], ["dubbo", "config"]):
            return True
        if len(parts) == 2 and parts[0] == "dubbo":
            return bool(self._tree_folder(parts))
        raise self._refuse(path, "checking")

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        makepath: bool = True,
        protected: bool = False,
    ) -> None:
        """Publish a config node, or register a provider/consumer URL as an instance.
        ``protected`` has no effect, as on etcd: who may write what in Nacos is its auth
        plugin's roles, set by Nacos's administrator (``dubbo-py acl nacos-auth``), not a
        property of the node; so an operator with an identity pushes rules as without one."""
        del makepath, protected  # Nacos has no parents, and no per-node access control
        head, _, name = validate_path(path).rpartition("/")
        category = self._category(head)
        if category is not None:
            if not ephemeral and category[1] in ("configurators", "routers"):
                # A persistent node here is an operator's URL (an override://, a route://,
                # dynamic=false) meant to outlive its writer; a Nacos instance goes with the
                # client that registered it, so it would vanish when the CLI exits. (A provider
                # or consumer with dynamic=false is registered as an instance all the same:
                # it is there while its process is.)
                raise NotInLayoutError(
                    f"{self}: a persistent {category[1]} URL ({path}) cannot be kept in Nacos "
                    "(its instances go with the client that registered them): write a "
                    "<service>.configurators rule instead ('dubbo-py rules push'), as Dubbo "
                    "reads it from the config center: docs/registry.md, Nacos"
                )
            self._register(path, category[1], name)
            return
        if applevel.instance_of(path) is not None:
            if not ephemeral:
                raise NotInLayoutError(
                    f"{self}: an application instance ({path}) is an ephemeral Nacos instance; "
                    "a persistent one needs Nacos's own health checks: docs/registry.md, Nacos"
                )
            self._register_instance(path, data)
            return
        if self.exists(path):
            raise NodeExistsError(f"node {path} already exists in {self}")
        if ephemeral:
            raise StoreError(f"{self}: config nodes cannot be ephemeral in Nacos ({path})")
        self._publish(path, data)

    def ensure_path(self, path: str) -> None:
        """Folders need no creating in Nacos; a config node absent is refused (no empty
        config)."""
        if self._category(path) is not None or self._config_folder(path) is not None:
            return
        if path in ("/", "/dubbo", "/dubbo/config", "/dubbo/config-history"):
            return
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "dubbo":
            # An interface's folder (its categories' parent): a registry with an identity
            # makes it before registering (Registry(protect=True)), which had failed here.
            return
        if path in (SERVICES_ROOT, METADATA_ROOT):
            return
        if applevel.application_of(path) is not None:
            return
        if not self.exists(path):
            raise self._refuse(path, "creating an empty")

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Remove a config node or deregister one of this store's instances."""
        import v2.nacos as nacos

        del recursive
        param = self._owned.pop(path, None)
        if param is not None:
            self._run(self._publish_instances(param))
            return
        if applevel.instance_of(path) is not None:
            if self.exists(path):
                raise StoreError(
                    f"{self}: {path} is another client's Nacos instance: only the client that "
                    "registered it can remove it (it goes when that client disconnects)"
                )
            raise NoNodeError(f"node {path} does not exist in {self}")
        if self._config_key(path) is None:
            raise self._refuse(path, "deleting")
        data_id, group, current = self._current(path)
        key = (data_id, group)
        # Checked, then removed: Nacos has no compare-and-delete (docs/registry.md, Nacos).
        if version != -1 and content_version(current) != version:
            raise BadVersionError(
                f"{self}: {path} is at version {content_version(current)}, not {version}"
            )
        self._written.pop(path, None)
        self._run(self._config.remove_config(nacos.ConfigParam(data_id=key[0], group=key[1])))
        self._settle(path, key, None, current)

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
            group_name=self._group,
            ip=url.host,
            port=url.port,
            weight=float(url.get_int("weight", 100)),
            metadata=metadata,
        )
        self._owned[path] = param
        try:
            self._run(self._publish_instances(param))
        except BaseException:
            del self._owned[path]
            raise

    def _instance_param(self, path: str, data: bytes) -> Any:
        """The registration of an instance node's document (checked against its path)."""
        import v2.nacos as nacos

        try:
            instance = applevel.registration(path, data)
        except InstanceError as exc:
            raise StoreError(f"{self}: {exc}") from None
        # As NacosNamingServiceUtils.toInstance: the instance metadata as it is, weight left at
        # Nacos's default (1.0), enabled as the document says.
        return nacos.RegisterInstanceParam(
            service_name=instance.app,
            group_name=self._group,
            ip=instance.host,
            port=instance.port,
            enabled=instance.enabled,
            metadata=dict(instance.metadata),
        )

    def _register_instance(self, path: str, data: bytes) -> None:
        """Register an application instance (``/services/<app>/<host:port>``). An instance of
        the same address another client registered is not "existing": Nacos keeps one per
        address, and the newest registration is what it serves (a restarted provider takes its
        old instance over, as it deletes and re-creates a leftover node in ZooKeeper)."""
        if path in self._owned:
            raise NodeExistsError(f"node {path} already exists in {self}")
        param = self._instance_param(path, data)
        self._owned[path] = param
        try:
            self._run(self._publish_instances(param))
        except BaseException:
            del self._owned[path]
            raise

    def _update_instance(self, path: str, data: bytes, version: int) -> int:
        """Register one of this store's instances again with a new document (a new revision).
        Another client's instance cannot be changed from here."""
        old = self._owned.get(path)
        if old is None:
            if self.exists(path):
                raise StoreError(
                    f"{self}: {path} is another client's Nacos instance: only the client that "
                    "registered it can change it"
                )
            raise NoNodeError(f"node {path} does not exist in {self}")
        current = self._run(self._app_instances(old.service_name)).get(f"{old.ip}:{old.port}")
        if version != -1 and (current is None or content_version(current) != version):
            raise BadVersionError(f"{self}: {path} is not at version {version}")
        param = self._instance_param(path, data)
        self._owned[path] = param
        try:
            self._run(self._publish_instances(param))
        except BaseException:
            self._owned[path] = old
            raise
        return content_version(
            applevel.instance_document(param.service_name, param.ip, param.port, param.metadata)
        )

    def _instances_now(self, app: str) -> dict[str, str]:
        """The application's instance documents: the read a watch of ``app`` is being told
        of, when asked from inside that callback (application-level discovery reads each
        instance the listing named: from the listing's own read, one query in all, not one
        query of the whole service per instance), else a read of the server."""
        told = getattr(self._telling, "apps", {})
        if app in told:
            return dict(told[app])
        return self._run(self._app_instances(app))

    async def _app_instances(self, app: str) -> dict[str, str]:
        """``host:port`` -> instance document of the application's usable instances, asked of
        the server (see :meth:`_urls` for why not through the SDK's cache)."""
        info = await self._naming.grpc_client_proxy.query_instance_of_service(
            app, self._group, "", False
        )
        return applevel.instances_read(app, info.hosts if info is not None else None)

    async def _publish_instances(self, changed: Any) -> None:
        """Tell the server this store's instances of ``changed``'s service, all at once.

        A Nacos 2.x/3.x client holds one registration per service: registering a second
        instance of a service replaced the first (a process serving one interface on two ports
        lost one). So one instance is registered alone, several as a batch (what Dubbo's
        NacosRegistry does too), and the last one leaving is deregistered."""
        import v2.nacos as nacos

        service, group = changed.service_name, changed.group_name
        mine = [
            p for p in self._owned.values() if p.service_name == service and p.group_name == group
        ]
        if not mine:
            await self._naming.deregister_instance(_deregistration(changed))
        elif len(mine) == 1:
            await self._naming.register_instance(mine[0])
        else:
            await self._naming.batch_register_instances(
                nacos.BatchRegisterInstanceParam(
                    service_name=service, group_name=group, instances=mine
                )
            )

    async def _service_names(self, prefix: str = "") -> list[str]:
        """The names of this namespace's services (in the naming group) starting with
        ``prefix``."""
        import v2.nacos as nacos

        names: list[str] = []
        page = 1
        while True:
            listed = await self._naming.list_services(
                nacos.ListServiceParam(
                    # Nacos 3 lists nothing for "": the default namespace is named "public"
                    namespace_id=self._namespace or "public",
                    group_name=self._group,
                    page_no=page,
                    page_size=_PAGE,
                )
            )
            services = list(listed.services or [])
            names += [s for s in services if s.startswith(prefix)]
            if len(services) < _PAGE:
                break
            page += 1
        return names

    async def _urls(
        self,
        interface: str,
        category: str,
        seen: Callable[[list[str]], Coroutine[Any, Any, None]] | None = None,
    ) -> list[str]:
        names = await self._service_names(f"{category}:{interface}:")
        if seen is not None:
            await seen(names)
        urls: list[str] = []
        for service in names:
            # Asked of the server each time, not through list_instances: that subscribes
            # (even with subscribe=False) and then answers from the SDK's subscription cache,
            # which against Nacos 3.1 kept a deregistered instance for good (the server's own
            # list was already empty): a provider leaving was never seen.
            info = await self._naming.grpc_client_proxy.query_instance_of_service(
                service, self._group, "", False
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
        of every Nacos service of that interface; or the nodes of a config folder (the data
        ids of its group, from the server's admin HTTP API)."""
        category = self._category(path)
        if category is not None:
            return self._run(self._urls(*category))
        app = applevel.application_of(path)
        if app is not None:
            return sorted(self._run(self._app_instances(app)))
        if path == SERVICES_ROOT:
            return self._run(self._applications())
        metadata = validate_path(path).split("/")[1:]
        if len(metadata) == 3 and "/" + "/".join(metadata[:2]) == METADATA_ROOT:
            # The revisions of an application's documents: the groups of its data id.
            return sorted({g for d, g in self._config_list("", metadata[2]) if d == metadata[2]})
        parts = validate_path(path).split("/")[1:]
        folder = self._config_folder(path)
        if parts == ["dubbo", "config"]:
            groups = {g for _, g in self._config_list("", "")}
            revisions = {g for g in groups if applevel.is_revision_group(g)}
            return sorted(groups - _HISTORY_GROUPS - {"mapping"} - revisions)
        if folder is None and (parts == ["dubbo"] or (len(parts) == 2 and parts[0] == "dubbo")):
            return self._tree_folder(parts)
        if folder is None:
            raise self._refuse(path, "listing")
        group, prefix = folder
        names = [d[len(prefix) :] for d in self._list_configs(group, prefix)]
        if group == HISTORY_ENTRY_GROUP:
            names = [n for n in names if n.isdigit()]
        return sorted(names)

    async def _applications(self) -> list[str]:
        """The names of the naming group's services that are not an interface's
        (``<category>:<interface>:<version>:<group>``): the applications, as Dubbo's
        ``NacosServiceDiscovery.getServices`` lists them."""
        names = await self._service_names()
        return sorted(
            n for n in names if not (n.count(":") == 3 and n.split(":", 1)[0] in _CATEGORIES)
        )

    def _tree_folder(self, parts: list[str]) -> list[str]:
        """``/dubbo``: every interface with a Dubbo-named service, and the config folders;
        ``/dubbo/<interface>``: the categories it has services of."""
        services = self._run(self._service_names())
        split = [n.split(":") for n in services]
        named = [p for p in split if len(p) == 4 and p[0] in _CATEGORIES]
        if len(parts) == 1:
            return sorted({p[1] for p in named} | {"config", "config-history", "mapping"})
        if parts[1] in ("config", "config-history", "mapping", "metadata"):
            raise self._refuse("/" + "/".join(parts), "listing")
        return sorted({p[0] for p in named if p[1] == parts[1]})

    # ------------------------------------------------------------------ admin HTTP API

    def _http(self, host: str, path: str, query: dict[str, str], post: bool = False) -> Any:
        body = urllib.parse.urlencode(query)
        url = f"http://{host}/nacos{path}"
        request = (
            urllib.request.Request(url, data=body.encode(), method="POST")
            if post
            else urllib.request.Request(f"{url}?{body}")
        )
        with urllib.request.urlopen(request, timeout=self._connect_timeout) as response:
            return json.loads(response.read().decode())

    def _login(self, host: str) -> str:
        """An access token of this store's identity from ``host`` (Nacos's login API)."""
        assert self._credentials is not None
        user, password = self._credentials
        answer = self._http(
            host, "/v3/auth/user/login", {"username": user, "password": password}, post=True
        )
        return str(answer.get("accessToken", ""))

    def _auth_off(self, host: str) -> bool:
        """Whether ``host`` says its auth is off (``/v3/admin/core/state``, which Nacos serves
        to anyone); False when it does not say."""
        try:
            state = self._http(host, "/v3/admin/core/state", {})
            return str((state.get("data") or {}).get("auth_enabled", "")).lower() == "false"
        except (OSError, ValueError, AttributeError):
            return False

    def _check_login(self) -> None:
        """StoreError when a server answers and refuses this store's login (a wrong user name
        or password: Nacos 3 answers 403 for an unknown user, 500 for a wrong password) and
        has auth on; nothing when one accepts it, none answers (the connection then fails as
        without an identity) or the server has auth off (warned: the identity is not used, as
        Dubbo's Nacos client connects there whatever its login gave)."""
        assert self._credentials is not None
        refusals = []
        for host in self._hosts.split(","):
            try:
                self._login(host)
                return
            except urllib.error.HTTPError as exc:
                refusals.append((host, exc.code))
            except (OSError, ValueError):
                continue  # not answering (or not Nacos): as without an identity
        if refusals and self._auth_off(refusals[0][0]):
            self._anonymous = True
            _log.warning(
                "%s: Nacos refused the login of user %r, but its auth is off: connecting "
                "without an identity",
                self,
                self._credentials[0],
            )
            return
        if refusals:
            refusals_text = "; ".join(f"{host}: HTTP {code}" for host, code in refusals)
            raise StoreError(
                f"{self}: Nacos refused the login of user {self._credentials[0]!r} "
                f"({refusals_text}): check the user name and password (username=/"
                "password= or user:password@ in the address, or --auth)"
            )

    def _list_configs(self, group: str, prefix: str) -> list[str]:
        """Every data id of ``group`` starting with ``prefix`` in this store's namespace."""
        return [d for d, g in self._config_list(group, prefix) if g == group]

    def _config_list(self, group: str, prefix: str) -> list[tuple[str, str]]:
        """``(data id, group)`` of the configs of ``group`` (every group for "") whose data id
        starts with ``prefix``."""
        if self._closed or not self._started:
            raise StoreError(f"{self} is {'closed' if self._closed else 'not started'}")
        failures = []
        for host in self._hosts.split(","):
            try:
                query = {
                    "namespaceId": self._namespace or "public",
                    "groupName": group,
                    "dataId": f"{prefix}*" if prefix else "",
                    "search": "blur",
                    "pageSize": str(_PAGE),
                }
                if self._credentials and not self._anonymous:
                    query["accessToken"] = self._login(host)
                found: list[tuple[str, str]] = []
                page = 1
                while True:
                    answer = self._http(
                        host, "/v3/admin/cs/config/list", {**query, "pageNo": str(page)}
                    )
                    items = (answer.get("data") or {}).get("pageItems") or []
                    found += [(str(i["dataId"]), str(i["groupName"])) for i in items]
                    if len(items) < _PAGE:
                        break
                    page += 1
                return [(d, g) for d, g in found if d.startswith(prefix)]
            except (OSError, ValueError, KeyError, urllib.error.URLError) as exc:
                failures.append(f"{host}: {exc}")
        raise StoreError(
            f"{self}: listing config group {group} through the admin HTTP API "
            f"(/nacos/v3/admin/cs/config/list) failed: {'; '.join(failures)}"
        )

    # ------------------------------------------------------------------ watches

    def _watch(
        self,
        key: tuple[str, str],
        read: Callable[[], Coroutine[Any, Any, Any]],
        report: Callable[[Any], None],
        on_first: Callable[[PolledNode], Callable[[], None]] | None = None,
        interval: float | None = None,
    ) -> Cancel:
        """Watch ``key`` (kind, path): the watches of one node share one poller
        (:class:`PolledNode`). ``on_first`` runs when a poller is made, with it (to wake it,
        or offer it a pushed state), and returns what to do when its last watch leaves (a
        config watch's push listener)."""
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
                node.at_idle(on_first(node))
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
        """Poll a providers/consumers folder's URLs (woken by the server's push); called on
        change."""
        app = applevel.application_of(path)
        if app is not None:
            return self._watch_app(app, lambda docs: sorted(docs), callback)
        category = self._category(path)
        if category is None:
            raise self._refuse(path, "watching")
        interface, kind = category
        # The server's service-change push wakes the poll: each service of the folder found by
        # a read is subscribed to (a new version or group is found by the next poll).
        subscribed: dict[str, Any] = {}
        wakes: list[threading.Event] = []

        async def subscribe(names: list[str]) -> None:
            import v2.nacos as nacos

            if not wakes:
                return
            wake = wakes[0]

            async def changed(_instances: Any) -> None:
                wake.set()

            for name in names:
                if name in subscribed:
                    continue
                param = nacos.SubscribeServiceParam(
                    service_name=name, group_name=self._group, subscribe_callback=changed
                )
                try:
                    await self._naming.subscribe(param)
                except Exception as exc:  # the poll still reads the folder
                    _log.debug("%s: no push for %s: %s", self, name, exc)
                    continue
                subscribed[name] = param

        def pushed(node: PolledNode) -> Callable[[], None]:
            wakes.append(node.wake)

            return self._unsubscriber(subscribed.values)

        return self._watch(
            ("children", path), lambda: self._urls(interface, kind, subscribe), callback, pushed
        )

    def _unsubscriber(self, params: Callable[[], Iterable[Any]]) -> Callable[[], None]:
        """Cancel the naming subscriptions ``params()`` names when a watch ends (none once the
        store is closed: its naming client is gone, and the server drops them with it)."""

        def unsubscribe() -> None:
            for param in list(params()):
                if self._closed:
                    return
                try:
                    self._run(self._naming.unsubscribe(param))
                except StoreError as exc:
                    _log.debug("%s: not unsubscribed: %s", self, exc)

        return unsubscribe

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Poll a config node, or an application instance; ``(None, -1)`` while absent."""
        instance = applevel.instance_of(path)
        if instance is not None:
            app, name = instance

            def report_instance(doc: str | None) -> None:
                if doc is None:
                    callback(None, -1)
                else:
                    callback(doc.encode(), content_version(doc))

            return self._watch_app(app, lambda docs: docs.get(name), report_instance)
        key = self._config_key(path)
        if key is None:
            raise self._refuse(path, "watching")

        def report(text: str | None) -> None:
            if text is None:
                callback(None, -1)
            else:
                callback(text.encode(), content_version(text))

        data_id, group = key

        def listen(node: PolledNode) -> Callable[[], None]:
            # The SDK's config listener is called with the content it queried after the
            # server's change notice (:func:`_query_on_notice`), which is handed to the watches
            # as it is: reading the server again was one more request per push and process,
            # and two hand-offs between the poller thread and the event loop. A lost push
            # costs one config poll interval, not the change.
            async def on_change(*pushed: Any) -> None:
                if len(pushed) == 4 and isinstance(pushed[3], str):  # tenant, group, id, text
                    node.offer(pushed[3] or None)  # Nacos has no empty config: "" is absent
                else:  # another SDK's listener arguments: read the server, as before
                    node.wake.set()

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

    def _watch_app(
        self,
        app: str,
        part: Callable[[dict[str, str]], _T],
        report: Callable[[_T], None],
    ) -> Cancel:
        """Watch one application's instances: the folder's and each instance's watches share
        one poller of the service (one read per poll however many instances are watched), each
        called when its ``part`` of the read changes. The server's push for the service wakes
        the poll, as for a providers folder."""
        last: list[Any] = []

        def on_read(docs: dict[str, str]) -> None:
            now = part(docs)
            if last and last[0] == now:
                return
            last[:] = [now]
            # While the watch is told, an instance read of this application on this thread
            # is answered from ``docs`` (:meth:`_instances_now`): the same read, so what the
            # callback reads agrees with what it was told.
            told = getattr(self._telling, "apps", None)
            if told is None:
                told = self._telling.apps = {}
            before = told.get(app)
            told[app] = docs
            try:
                report(now)
            finally:
                if before is None:
                    del told[app]
                else:
                    told[app] = before

        def pushed(node: PolledNode) -> Callable[[], None]:
            import v2.nacos as nacos

            async def changed(_instances: Any) -> None:
                node.wake.set()

            param = nacos.SubscribeServiceParam(
                service_name=app, group_name=self._group, subscribe_callback=changed
            )
            try:
                self._run(self._naming.subscribe(param))
            except StoreError as exc:  # the poll still reads the service
                _log.debug("%s: no push for %s: %s", self, app, exc)
                return lambda: None

            return self._unsubscriber(lambda: (param,))

        return self._watch(
            ("app", f"{SERVICES_ROOT}/{app}"), lambda: self._app_instances(app), on_read, pushed
        )
