"""The ``services`` setting: outside servers the user vouches for, and the endpoints the
shim writes.

A socket's answers come from whoever is at the other end. A server the target's own tree
started is part of the run; any other (a developer's Postgres on ``127.0.0.1:5432``,
``/var/run/docker.sock``, a host on the network) holds data that can change between two
builds without any file memotest fingerprints changing (``memotest/world/network.py`` decides
which the tree served). An endpoint the user names in ``services`` is vouched for: its
data never changes the result.

Endpoints are written as the shim does (``memotest/_shim/net.c``, ``PROTOCOL.md``):
``inet:1.2.3.4:80``, ``inet6:[::1]:80``, ``unix:/path``, ``unix:@abstract`` (a NUL byte
of the name as ``\\0``, a backslash as ``\\\\``), ``unix:?name`` (a path the shim
could not make absolute); users write them (and read them in reasons) without the
``inet:`` prefixes: ``127.0.0.1:6379``, ``[::1]:80``, ``localhost:*``,
``unix:/var/run/docker.sock``.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from memotest.lazy import lazy_module

if TYPE_CHECKING:
    import socket
else:
    socket = lazy_module("socket")  # imported when a host name is looked up

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Endpoint:
    """An endpoint as the shim wrote it: an IP and port, or a Unix socket name."""

    ip: IP | None = None
    port: int = 0
    unix: str | None = None  # a path, or "@name" for an abstract socket
    other: str | None = None  # a family memotest does not know
    name: str | None = None  # a host name looked up through the resolver (``dns:NAME``)

    @property
    def local(self) -> bool:
        """On this machine: a Unix socket, a loopback or an unspecified address."""
        if self.unix is not None:
            return True
        return self.ip is not None and (self.ip.is_loopback or self.ip.is_unspecified)

    def __str__(self) -> str:
        if self.unix is not None:
            return f"unix:{self.unix}"
        if self.name is not None:
            return self.name
        if self.ip is None:
            return f"socket family {self.other}"
        host = f"[{self.ip}]" if self.ip.version == 6 else str(self.ip)
        return f"{host}:{self.port}"


def parse_endpoint(raw: str) -> Endpoint:
    """An endpoint from the shim's text (``inet:1.2.3.4:80``...)."""
    family, _, rest = raw.partition(":")
    if family == "unix":
        return Endpoint(unix=rest)
    if family == "dns":
        return Endpoint(name=rest)
    if family in ("inet", "inet6"):
        host, _, port = rest.rpartition(":")
        try:
            ip: IP = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return Endpoint(other=raw)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        return Endpoint(ip=ip, port=int(port) if port.isdigit() else 0)
    return Endpoint(other=rest or raw)


@dataclass(frozen=True)
class Service:
    """One entry of ``settings.services``: a Unix socket name (a glob), or a host and a
    port where ``*`` stands for any port and ``localhost`` for any loopback address."""

    text: str
    unix: str | None = None
    host: str | None = None  # None: any host
    port: int | None = None  # None: any port

    def matches(self, ep: Endpoint) -> bool:
        if self.unix is not None or ep.unix is not None:
            return (
                self.unix is not None
                and ep.unix is not None
                and fnmatch.fnmatchcase(ep.unix, self.unix)
            )
        if ep.name is not None:  # a lookup: any entry of that host (or of every host)
            return self.host is None or self.host.lower() == ep.name.lower()
        if ep.ip is None or (self.port is not None and self.port != ep.port):
            return False
        if self.host is None:
            return True
        if self.host == "localhost":
            return ep.ip.is_loopback or ep.ip.is_unspecified
        return ep.ip in _addresses(self.host)


_HOST_FORM = (
    '"127.0.0.1:6379", "[::1]:5432", "localhost:*", "db.example.com:5432", or "unix:/path/to.sock"'
)
_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)\Z")


def parse_service(entry: str) -> Service:
    """A ``services`` entry, or ValueError saying what is wrong with it."""
    if entry.startswith("unix:"):
        name = entry[5:]
        if not (name.startswith("/") or name.startswith("@")) or len(name) < 2:
            raise ValueError(
                f"services entry {entry!r}: a Unix socket is unix:/absolute/path or unix:@name"
            )
        return Service(entry, unix=name)
    host, sep, port = entry.rpartition(":")
    if not sep or not host:
        raise ValueError(f"services entry {entry!r}: write HOST:PORT, like {_HOST_FORM}")
    if not (port == "*" or (port.isascii() and port.isdigit() and 0 < int(port) < 65536)):
        raise ValueError(
            f"services entry {entry!r}: the port {port!r} is not a number from 1 to 65535 "
            f"nor *; write HOST:PORT, like {_HOST_FORM}"
        )
    return Service(entry, host=_service_host(entry, host), port=None if port == "*" else int(port))


def _service_host(entry: str, host: str) -> str | None:
    """The host of an entry: None for ``*``, ``localhost``, an IP address, or a host name;
    ValueError for anything else (an IPv6 address without brackets, a bracket left open,
    a dotted number that is no IPv4 address)."""
    if host == "*":
        return None
    if host.startswith("[") or host.endswith("]") or ":" in host:
        inner = host[1:-1] if host.startswith("[") and host.endswith("]") else None
        try:
            if inner is None or "[" in inner or "]" in inner:
                raise ValueError
            return str(ipaddress.IPv6Address(inner.split("%")[0]))
        except ValueError:
            raise ValueError(
                f"services entry {entry!r}: {host!r} is not an IPv6 address in brackets "
                '(write "[::1]:PORT")'
            ) from None
    if host.lower() == "localhost":
        return "localhost"
    labels = host.rstrip(".").split(".")
    if all(label.isdigit() for label in labels):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise ValueError(f"services entry {entry!r}: {host!r} is not an IPv4 address") from None
    if not all(_LABEL.match(label) for label in labels) or len(host) > 253:
        raise ValueError(
            f"services entry {entry!r}: {host!r} is neither an IP address nor a host name"
        )
    return host


def check_services(entries: Iterable[str]) -> str | None:
    """The first mistake in a ``services`` list, or None."""
    for entry in entries:
        try:
            parse_service(entry)
        except ValueError as exc:
            return str(exc)
    return None


@lru_cache(maxsize=64)
def _addresses(host: str) -> frozenset[IP]:
    """The addresses a declared host stands for (a literal, or a name resolved once)."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        if isinstance(literal, ipaddress.IPv6Address) and literal.ipv4_mapped:
            literal = literal.ipv4_mapped
        return frozenset({literal})
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return frozenset()
    out: set[IP] = set()
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        out.add(ip)
    return frozenset(out)
