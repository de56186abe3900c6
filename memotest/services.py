"""The network a target used, and which of it the result may depend on.

A socket's answers come from whoever is at the other end. A server the target's own tree
started is part of the run; any other (a developer's Postgres on ``127.0.0.1:5432``,
``/var/run/docker.sock``, a host on the network) holds data that can change between two
builds without any file memotest fingerprints changing. So a result is not reusable when
the tree talked to an endpoint that no process of the tree served, received from another
machine, or used a socket that reaches the network below addresses, unless the user named
the endpoint in the ``services`` setting and so vouched that its data never changes the
result.

What the shim records (``memotest/_shim/net.c``, ``PROTOCOL.md``): ``C`` an endpoint talked
to (``connect``, the destination of ``sendto``/``sendmsg``), ``B`` ``"TYPE ADDRESS"`` an
endpoint served (``bind``, ``listen``, with the real port of a port 0), ``A`` a peer outside
the machine that reached the tree (``accept``, ``recvfrom``), ``X`` a raw, packet, netlink
or other-family socket. Endpoints are written as the shim does: ``inet:1.2.3.4:80``,
``inet6:[::1]:80``, ``unix:/path``, ``unix:@abstract``; users write them (and read them in
reasons) without the ``inet:`` prefixes: ``127.0.0.1:6379``, ``[::1]:80``,
``localhost:*``, ``unix:/var/run/docker.sock``.

Netlink sockets read and change the kernel's network state (interfaces, routes), as
``/proc/net`` does: like ``/proc``, that is not an input, and they are allowed.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_DECLARE = "declare it in settings.services if its data never changes the result"


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
    if not sep or not host or not (port == "*" or (port.isdigit() and int(port) < 65536)):
        raise ValueError(
            f"services entry {entry!r}: write HOST:PORT (PORT a number or *), like "
            '"127.0.0.1:6379", "[::1]:5432", "localhost:*", or "unix:/path/to.sock"'
        )
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host.lower() == "localhost":
        host = "localhost"
    return Service(
        entry, host=None if host == "*" else host, port=None if port == "*" else int(port)
    )


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
        return frozenset({ipaddress.ip_address(host)})
    except ValueError:
        pass
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


def _same_unix(a: str, b: str) -> bool:
    if a == b:
        return True
    if a.startswith("@") or b.startswith("@"):
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def served_by_tree(ep: Endpoint, served: Sequence[Endpoint]) -> bool:
    """Whether a process of the tree bound ``ep``: the same Unix name, or the same port on
    the same address, a wildcard bind (``0.0.0.0``, ``::``) serving every local address.
    At any time of the run: a client that tried before its server was up is the tree's."""
    for s in served:
        if ep.unix is not None or s.unix is not None:
            if ep.unix is not None and s.unix is not None and _same_unix(ep.unix, s.unix):
                return True
            continue
        if ep.ip is None or s.ip is None or s.port != ep.port:
            continue
        if s.ip == ep.ip:
            return True
        # A connect to 0.0.0.0 or :: reaches this machine; a wildcard bind serves every
        # local address (``::`` also IPv4, dual-stack).
        if ep.local and (s.ip.is_unspecified or ep.ip.is_unspecified):
            if s.ip.is_unspecified and (s.ip.version == 6 or ep.ip.version == 4):
                return True
            if ep.ip.is_unspecified and s.ip.is_loopback:
                return True
    return False


def network_reasons(
    connects: Iterable[str],
    listens: Iterable[str],
    accepted: Iterable[str],
    sockets: Iterable[str],
    services: Sequence[str] = (),
) -> list[str]:
    """Why the network a trace used makes its result not reusable (empty: it does not)."""
    declared = [parse_service(s) for s in services]
    served: list[Endpoint] = []
    dgram: list[Endpoint] = []
    for rec in listens:
        socktype, _, raw = rec.partition(" ")
        ep = parse_endpoint(raw)
        served.append(ep)
        if socktype == "dgram" and ep.ip is not None and not ep.ip.is_loopback:
            dgram.append(ep)

    def allowed(ep: Endpoint) -> bool:
        return any(d.matches(ep) for d in declared)

    why: list[str] = []
    for raw in sorted(connects):
        ep = parse_endpoint(raw)
        if served_by_tree(ep, served) or allowed(ep):
            continue
        if ep.name is not None:
            why.append(
                f"looked up {ep} through the resolver (DNS), whose answer can change; "
                f"declare it in settings.services (as {ep}:*) if its answer never changes "
                "the result"
            )
        elif ep.local:
            why.append(f"connected to {ep}, which no process of the target listens on; {_DECLARE}")
        else:
            why.append(f"connected to a non-loopback address: {ep} ({_DECLARE})")
    for ep in dgram:
        if not allowed(ep):
            why.append(
                f"bound a datagram socket to {ep}, where other machines can send it data "
                f"unseen; {_DECLARE}"
            )
    for raw in sorted(accepted):
        ep = parse_endpoint(raw)
        if not allowed(ep):
            why.append(f"received from {ep}, another machine; {_DECLARE}")
    for raw in sorted(sockets):
        if not raw.startswith("netlink:"):
            socktype, _, detail = raw.partition(":")
            family, _, proto = detail.partition(":")
            why.append(
                f"opened a {socktype} socket (family {family}, protocol {proto}), which reaches "
                "the network below addresses"
                if socktype in ("raw", "packet")
                else f"opened a socket of address family {family}, which memotest cannot follow"
            )
    return why
