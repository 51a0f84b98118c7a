"""Address expressions of tag rules: which providers (host, port) an ``addresses`` entry covers.

Follows Apache Dubbo's ``NetUtils.matchIpExpression`` / ``matchIpRange`` and the tag router's
``0.0.0.0:<port>`` rule (dubbo-common NetUtils, dubbo-cluster TagStateRouter), validated up front
instead of failing per call:

==============================  ==============================================================
``10.0.0.5:20880``              that host and port
``10.0.0.5``                    that host, any port
``*`` / ``*.*.*.*[:port]``      any host (on that port when given)
``0.0.0.0:20880``, ``*:20880``  any host on that port (``*:port`` is our spelling of Dubbo's
                                ``0.0.0.0:port``)
``192.168.1.*``, ``192.168.1.1-65[:port]``
                                IPv4 with ``*`` or ``a-b`` ranges per octet
``10.0.0.0/8``, ``fd00::/8``    CIDR block (Python's :mod:`ipaddress`); no port allowed, as in
                                Dubbo
``[234e:0:4567::3d:ee]:8090``   IPv6, bracketed when a port follows; ``*`` and ``a-b`` ranges
                                (hex) need the full eight-group form, as in Dubbo
``provider-1.example:20880``    a host *name* compared by text (case-insensitive). Dubbo
                                resolves names through DNS; routing here never does DNS.
==============================  ==============================================================
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["AddressPattern", "parse_address_pattern"]

_ANY_HOST = "0.0.0.0"  # Dubbo's ANYHOST_VALUE


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """A parsed address expression; :meth:`matches` is pure and cheap (used at bind time)."""

    text: str
    kind: str  # "any" | "cidr" | "v4" | "v6" | "v6exact" | "name"
    port: int | None = None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    #: per-group inclusive ranges for "v4" (4 octets) / "v6" (8 hextets)
    ranges: tuple[tuple[int, int], ...] = ()
    name: str = ""

    def matches(self, host: str, port: int) -> bool:
        """Whether a provider at ``host:port`` is covered (IPv6 hosts may be bracketed)."""
        if self.port is not None and self.port != port:
            return False
        if self.kind == "any":
            return True
        if self.kind == "name":
            return host.lower() == self.name
        ip = _ip(host)
        if ip is None:
            return False
        if self.kind == "cidr":
            assert self.network is not None
            return ip.version == self.network.version and ip in self.network
        if self.kind == "v6exact":
            assert self.network is not None
            return ip.version == 6 and ip == self.network.network_address
        if self.kind == "v4":
            if ip.version != 4:
                return False
            groups = tuple(ip.packed)
        else:
            if ip.version != 6:
                return False
            packed = ip.packed
            groups = tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))
        return all(lo <= g <= hi for g, (lo, hi) in zip(groups, self.ranges, strict=True))


def parse_address_pattern(text: str) -> AddressPattern:
    """Parse one ``addresses`` entry; ValueError naming the problem for a malformed one."""
    if not isinstance(text, str):
        raise ValueError(f"address must be a string, got {type(text).__name__}")
    raw = text.strip()
    if not raw:
        raise ValueError("address is empty")
    if raw in ("*", "*.*.*.*"):
        return AddressPattern(raw, "any")
    if "/" in raw:
        return _cidr(raw)
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise ValueError(f"{raw!r}: missing ']' after an IPv6 address")
        rest = raw[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{raw!r}: expected ':port' after ']'")
        port = _port(raw, rest[1:]) if rest else None
        return _v6(raw, raw[1:end], port)
    if raw.count(":") >= 2:
        return _v6(raw, raw, None)
    host, port = raw, None
    if ":" in raw:
        host, _, port_text = raw.partition(":")
        port = _port(raw, port_text)
    if host in ("*", "*.*.*.*", _ANY_HOST) and port is not None:
        return AddressPattern(raw, "any", port=port)
    if host == "*":
        return AddressPattern(raw, "any")
    if _looks_ipv4(host):
        return AddressPattern(raw, "v4", port=port, ranges=_groups(raw, host.split("."), 10, 255))
    if not host or any(not (c.isalnum() or c in "-._") for c in host):
        raise ValueError(f"{raw!r}: not an IP address, IP expression, CIDR block or host name")
    return AddressPattern(raw, "name", port=port, name=host.lower())


def _cidr(raw: str) -> AddressPattern:
    if raw.count("/") != 1 or ":" in raw.split("/")[1]:
        raise ValueError(f"{raw!r}: a CIDR block cannot carry a port")
    try:
        network = ipaddress.ip_network(raw, strict=False)
    except ValueError as exc:
        raise ValueError(f"{raw!r}: invalid CIDR block ({exc})") from None
    return AddressPattern(raw, "cidr", network=network)


def _v6(raw: str, host: str, port: int | None) -> AddressPattern:
    if "*" in host or "-" in host:
        parts = host.split(":")
        if len(parts) != 8:
            raise ValueError(
                f"{raw!r}: an IPv6 expression with '*' or ranges must list all eight groups, "
                "e.g. 234e:0:4567:0:0:0:3d:*"
            )
        return AddressPattern(raw, "v6", port=port, ranges=_groups(raw, parts, 16, 0xFFFF))
    try:
        ip = ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(f"{raw!r}: not an IPv6 address") from None
    return AddressPattern(raw, "v6exact", port=port, network=ipaddress.IPv6Network(ip))


def _groups(raw: str, parts: list[str], base: int, top: int) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for part in parts:
        if part == "*":
            out.append((0, top))
            continue
        bounds = part.split("-")
        if len(bounds) > 2 or not all(bounds):
            raise ValueError(f"{raw!r}: bad group {part!r} (use a number, '*' or 'a-b')")
        try:
            lo, hi = (int(b, base) for b in (bounds[0], bounds[-1]))
        except ValueError:
            raise ValueError(f"{raw!r}: bad group {part!r}") from None
        if not 0 <= lo <= hi <= top:
            raise ValueError(f"{raw!r}: group {part!r} out of range 0..{top}")
        out.append((lo, hi))
    return tuple(out)


def _port(raw: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise ValueError(f"{raw!r}: bad port {text!r}")
    return int(text)


def _looks_ipv4(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p and all(c.isdigit() or c in "*-" for c in p) for p in parts)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
