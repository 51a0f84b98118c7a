"""The URL value: the unit of registry data, parsed and encoded exactly as Apache Dubbo does.

A provider, a consumer, a routing rule and an override rule are all URLs::

    tri://10.0.0.5:50051/demo.Greeter?application=greeter-provider&version=1.0.0

Parsing follows ``org.apache.dubbo.common.URL.valueOf``: parameters after ``?`` split on ``&``
(a part without ``=`` maps to itself; ``default.k`` also supplies ``k`` when ``k`` is absent),
then ``protocol://``, then the path after the first ``/``, then ``user:password@``, then the port
after the last ``:`` (except for an IPv6 address with a zone id). Encoding writes parameters in
key order, as Dubbo's ``toFullString`` does, so two equal URLs always encode alike.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import quote_plus, unquote_plus

from dubbo_py.errors import URLError

__all__ = ["URL", "URLError", "decode_component", "encode_component"]

DEFAULT_KEY_PREFIX = "default."

#: What :meth:`URL.decode` accepts as a protocol and as a host (name, IPv4, ``[IPv6]``,
#: a bare IPv6 address with an optional zone, ``*``).
_PROTOCOL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}")
_HOST = re.compile(
    r"\*|[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})|\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\]"
    r"|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9_.-]+)?"
)
_CONTROL = frozenset(chr(c) for c in (*range(32), 127))

#: Parsed strings are interned: the providers of one service (and of one application across
#: services) repeat the same parameter keys and most values (``application``, ``interface``,
#: ``methods``, ``version``, ``side``, ...), so 100 000 parsed URLs share one string for each
#: instead of holding ~28 copies each (~1.5 kB per provider, the largest share of a consumer's
#: memory at that size). CPython's interned strings are freed when nothing else holds them.
_intern = sys.intern


def _shown(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:117] + "...")


def encode_component(text: str) -> str:
    """Encode like Java's ``URLEncoder.encode(text, "UTF-8")``, which Dubbo uses for node names.

    Java keeps ``A-Z a-z 0-9 . - * _`` and writes a space as ``+``; Python's ``quote_plus`` also
    keeps ``~``, which Java escapes, so it is escaped here to stay byte-identical with Dubbo.
    """
    return quote_plus(text, safe="*").replace("~", "%7E")


def decode_component(text: str) -> str:
    """Decode like Java's ``URLDecoder.decode(text, "UTF-8")`` (``+`` is a space)."""
    return unquote_plus(text)


@dataclass(frozen=True, slots=True)
class URL:
    """An immutable Dubbo URL. Build one with :meth:`parse` or the constructor, change one with
    :meth:`with_parameters` / :meth:`replace`; equal URLs hash alike."""

    protocol: str = ""
    host: str = ""
    port: int = 0
    path: str = ""
    username: str = ""
    password: str = ""
    parameters: Mapping[str, str] = field(default_factory=dict)
    #: ``host:port`` (or just the host when there is no port). Derived, and stored rather than
    #: computed because every call reads it (channel, quarantine and statistics lookups).
    address: str = field(init=False, repr=False, compare=False)
    # The hash and the full string, computed once on first use: a provider notification hashes,
    # sorts and matches every URL of the fleet, and the URL objects outlive the notification.
    _hash: int | None = field(init=False, repr=False, compare=False, default=None)
    _full: str | None = field(init=False, repr=False, compare=False, default=None)
    # The dict behind the read-only ``parameters`` view: the accessors read it directly, since
    # ``mappingproxy.get`` goes through a method call and costs several times a dict's.
    _params: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        params = dict(self.parameters)
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "parameters", MappingProxyType(params))
        if not 0 <= self.port <= 65535:
            raise URLError(f"port {self.port} out of range 0..65535")
        address = _intern(f"{self.host}:{self.port}") if self.port else self.host
        object.__setattr__(self, "address", address)

    def __hash__(self) -> int:
        cached = self._hash
        if cached is not None:
            return cached
        value = hash(
            (
                self.protocol,
                self.host,
                self.port,
                self.path,
                self.username,
                self.password,
                frozenset(self.parameters.items()),
            )
        )
        object.__setattr__(self, "_hash", value)
        return value

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, URL):
            return NotImplemented
        return (
            self.protocol == other.protocol
            and self.host == other.host
            and self.port == other.port
            and self.path == other.path
            and self.username == other.username
            and self.password == other.password
            and dict(self.parameters) == dict(other.parameters)
        )

    # ------------------------------------------------------------------ parsing and encoding

    @classmethod
    def parse(cls, text: str) -> URL:
        """Parse a Dubbo URL string; raises :class:`URLError` naming the string on bad input."""
        if not isinstance(text, str):
            raise URLError(f"URL must be a string, got {type(text).__name__}")
        url = text.strip()
        if not url:
            raise URLError("URL is empty")
        parameters: dict[str, str] = {}
        i = url.find("?")
        if i >= 0:
            for raw in url[i + 1 :].split("&"):
                part = raw.strip()
                if not part:
                    continue
                j = part.find("=")
                if j >= 0:
                    key, value = _intern(part[:j]), _intern(part[j + 1 :])
                    parameters[key] = value
                    if key.startswith(DEFAULT_KEY_PREFIX):
                        parameters.setdefault(_intern(key[len(DEFAULT_KEY_PREFIX) :]), value)
                else:
                    part = _intern(part)
                    parameters[part] = part
            url = url[:i]
        protocol = ""
        i = url.find("://")
        if i >= 0:
            if i == 0:
                raise URLError(f"url missing protocol: {text!r}")
            protocol, url = url[:i], url[i + 3 :]
        else:
            i = url.find(":/")
            if i >= 0:
                if i == 0:
                    raise URLError(f"url missing protocol: {text!r}")
                protocol, url = url[:i], url[i + 1 :]
        path = ""
        i = url.find("/")
        if i >= 0:
            path, url = url[i + 1 :], url[:i]
        username = password = ""
        i = url.rfind("@")
        if i >= 0:
            userinfo, url = url[:i], url[i + 1 :]
            j = userinfo.find(":")
            if j >= 0:
                username, password = userinfo[:j], userinfo[j + 1 :]
            else:
                username = userinfo
        port = 0
        i = url.rfind(":")
        if 0 <= i < len(url) - 1 and not url.rfind("%") > i and not url.endswith("]"):
            digits = url[i + 1 :]
            if not digits.isdigit():
                raise URLError(f"bad port {digits!r} in URL {text!r}")
            port = int(digits)
            if port > 65535:
                raise URLError(f"port {port} out of range in URL {text!r}")
            url = url[:i]
        return cls(
            _intern(protocol), _intern(url), port, _intern(path), username, password, parameters
        )

    @classmethod
    def decode(cls, node_name: str) -> URL:
        """Read a URL from its URL-encoded form (a registry node name), strictly.

        :meth:`parse` takes any text (as Dubbo's ``valueOf`` does: ``hello`` is a URL whose
        host is ``hello``), but a node under ``providers/`` that is not a URL must not become a
        provider. So a node name must decode to ``protocol://host...``: a protocol of letters,
        digits, ``+ . -`` starting with a letter, and a host name, IPv4 or IPv6 address (``*``
        and ``0.0.0.0`` as rules write them). The path is optional: Dubbo 3 Python writes
        ``tri://host:port?service=<interface>``. Anything else raises :class:`URLError`."""
        text = decode_component(node_name)
        scheme, sep, _ = text.partition("://")
        if not sep or not _PROTOCOL.fullmatch(scheme):
            raise URLError(f"not a URL (no protocol://): {_shown(text)}")
        url = cls.parse(text)
        if not _HOST.fullmatch(url.host):
            raise URLError(f"not a URL (bad host {_shown(url.host)}): {_shown(text)}")
        if any(ch in _CONTROL for ch in url.path):
            raise URLError(f"not a URL (control character in the path): {_shown(text)}")
        return url

    def to_string(self, *, parameters: bool = True) -> str:
        """The full string, parameters sorted by key (Dubbo's ``toFullString``)."""
        if parameters:
            full = self._full
            if full is None:
                full = self._render(True)
                object.__setattr__(self, "_full", full)
            return full
        return self._render(False)

    def _render(self, parameters: bool) -> str:
        out: list[str] = []
        if self.protocol:
            out.append(self.protocol)
            out.append("://")
        if self.username:
            out.append(self.username)
            if self.password:
                out.append(":")
                out.append(self.password)
            out.append("@")
        out.append(self.host)
        if self.port > 0:
            out.append(f":{self.port}")
        if self.path:
            out.append("/")
            out.append(self.path)
        if parameters and self.parameters:
            out.append("?")
            out.append("&".join(f"{k}={v}" for k, v in sorted(self.parameters.items()) if k))
        return "".join(out)

    def encode(self, *, keep: bool = True) -> str:
        """The URL-encoded full string: the node name Dubbo writes under ``providers/`` etc.

        ``keep=False`` does not keep the full string on the URL when it is not kept yet: for a
        caller that keeps the encoded form itself (a rule book's source name), where a second
        copy would be ~200 B per rule and service (issue 42)."""
        if keep or self._full is not None:
            return encode_component(self.to_string())
        return encode_component(self._render(True))

    def __str__(self) -> str:
        return self.to_string()

    # ------------------------------------------------------------------ accessors

    @property
    def service_interface(self) -> str:
        """The ``interface`` parameter, else the path (Dubbo's ``getServiceInterface``)."""
        return self._params.get("interface") or self.path

    @property
    def service_key(self) -> str:
        """``group/interface:version`` with empty parts left out, as Dubbo's ``getServiceKey``."""
        key = self.service_interface
        group = self._params.get("group", "")
        version = self._params.get("version", "")
        if group:
            key = f"{group}/{key}"
        if version:
            key = f"{key}:{version}"
        return key

    @property
    def category(self) -> str:
        """The ``category`` parameter, defaulting to ``providers`` as in Dubbo."""
        return self._params.get("category", "providers")

    def get(self, key: str, default: str | None = None) -> str | None:
        """A parameter, or ``default`` when it is absent or empty."""
        value = self._params.get(key)
        return value if value else default

    def get_str(self, key: str, default: str = "") -> str:
        """A parameter as a string, ``default`` when absent or empty."""
        value = self._params.get(key)
        return value if value else default

    def get_int(self, key: str, default: int = 0) -> int:
        """A parameter as an int; ``default`` when absent, empty or not a number."""
        value = self._params.get(key)
        if not value:
            return default
        try:
            return int(value)
        except ValueError:
            try:
                return int(float(value))
            except ValueError:
                return default

    def get_float(self, key: str, default: float = 0.0) -> float:
        """A parameter as a float; ``default`` when absent, empty or not a number."""
        value = self._params.get(key)
        if not value:
            return default
        try:
            return float(value)
        except ValueError:
            return default

    def get_bool(self, key: str, default: bool = False) -> bool:
        """A parameter as a bool (``true``, case-insensitive, is true); ``default`` when absent."""
        value = self._params.get(key)
        if not value:
            return default
        return value.strip().lower() == "true"

    def get_method_parameter(self, method: str, key: str, default: str | None = None) -> str | None:
        """``<method>.<key>`` if set, else ``<key>``, else ``default`` (Dubbo's method params)."""
        value = self._params.get(f"{method}.{key}") if method else None
        if value:
            return value
        return self.get(key, default)

    def to_map(self) -> dict[str, str]:
        """Parameters plus the special keys protocol, username, password, host, port, path and
        address, as Dubbo's ``toMap`` (used by rule matchers that read any URL field)."""
        out = dict(self.parameters)
        for key, value in (
            ("protocol", self.protocol),
            ("username", self.username),
            ("password", self.password),
            ("host", self.host),
            ("path", self.path),
        ):
            if value:
                out[key] = value
        if self.port:
            out["port"] = str(self.port)
        if self.host:
            out["address"] = self.address
        return out

    # ------------------------------------------------------------------ building

    def with_parameters(self, **params: str | int | bool) -> URL:
        """A copy with these parameters added or replaced (bools written as true/false)."""
        merged = dict(self.parameters)
        for key, value in params.items():
            merged[key] = _as_param(value)
        return URL(
            self.protocol, self.host, self.port, self.path, self.username, self.password, merged
        )

    def with_parameter_map(self, params: Mapping[str, str]) -> URL:
        """A copy with the parameters of ``params`` added or replaced (keys with dots allowed)."""
        merged = dict(self.parameters)
        merged.update(params)
        return URL(
            self.protocol, self.host, self.port, self.path, self.username, self.password, merged
        )

    def without_parameters(self, *keys: str) -> URL:
        """A copy with these parameters removed."""
        kept = {k: v for k, v in self.parameters.items() if k not in keys}
        return URL(
            self.protocol, self.host, self.port, self.path, self.username, self.password, kept
        )

    def replace(self, **fields: object) -> URL:
        """A copy with some of protocol, host, port, path, username, password replaced."""
        values: dict[str, object] = {
            "protocol": self.protocol,
            "host": self.host,
            "port": self.port,
            "path": self.path,
            "username": self.username,
            "password": self.password,
            "parameters": self.parameters,
        }
        unknown = set(fields) - set(values)
        if unknown:
            raise TypeError(f"URL has no field(s) {sorted(unknown)}")
        values.update(fields)
        return URL(**values)  # type: ignore[arg-type]


def _as_param(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
