"""The network a target used, and which of it the result may depend on.

A socket's answers come from whoever is at the other end: a server of the target's own
tree is part of the run; any other holds data that can change between two builds (see
``memotest/world/services.py``). So a result is not reusable when the tree talked to an
endpoint that no process of the tree served *alone*, received from another machine, or
used a socket that reaches the network below addresses, unless the user named the
endpoint in ``services``.

What the shim records (``memotest/_shim/net.c``, ``PROTOCOL.md``): ``C`` ``"TYPE[,OUTCOME]
ADDRESS"`` an endpoint talked to (``connect``, the destination of ``sendto``/``sendmsg``;
OUTCOME ``absent`` or ``refused`` for a Unix path that failed so), ``B`` ``"TYPE[,FLAG...]
ADDRESS"`` an endpoint served (``bind``, ``listen``, ``setsockopt``, with the real port of
a port 0), ``A`` a peer outside the machine that reached the tree (``accept``,
``recvfrom``), ``X`` a raw, packet, netlink or other-family socket.

Who reaches a bound socket, and so whether the tree serves an endpoint alone:

- the socket's type: a stream port is not a datagram port of the same number;
- for a stream (or seqpacket) socket, whether it listens: one only bound (a client that
  picked its source port, with ``SO_REUSEADDR``) leaves the port to a server that listens
  there after it;
- its family and ``IPV6_V6ONLY`` (the option, or the ``net.ipv6.bindv6only`` default the
  socket took): a ``::`` bind serves IPv4 only when it is not IPv6-only;
- its address: a specific one serves that address, a wildcard (``0.0.0.0``, ``::``) every
  local one; a connect to the wildcard reaches the socket's own source address, which
  only a wildcard bind is sure to serve;
- ``SO_REUSEPORT`` (any socket), or ``SO_REUSEADDR`` on a datagram socket: another
  process outside the tree can bind the same port and get the connections or datagrams;
  the flags as the socket had them at bind, listen, or any later ``setsockopt``;
- a Unix path or abstract name: once bound, no one else can bind it; the same name and
  the same type (an abstract name is written with its NUL bytes escaped, so two names
  never read the same).

What carries nothing in is not a service use: a connect (or datagram) to a Unix path that
is not there found only that absence (an ``absent`` input of the path:
``tracer/collect.py``); a connect to a Unix path refused, or a datagram to a loopback port
where no socket was bound, found only that nobody serves there (an ``unserved`` input:
``inputs/unserved.py``). A datagram that got through to a Unix path from a socket no
one can answer (no name, no ``SO_PASSCRED``, no descriptors passed: journald's
``/dev/log`` clients) carries nothing back either but an error code: a ``sink`` input
holds that a datagram socket is there (``inputs/sink.py``), unless a Unix datagram
socket of the tree had a name or ``SO_PASSCRED`` (it may be the sender). Nor is
``uuidd`` a service (:data:`UNIQUE_VALUES`).

Netlink sockets read and change the kernel's network state (interfaces, routes), as
``/proc/net`` does: like ``/proc``, that is not an input, and they are allowed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from memotest.world.services import Endpoint, parse_endpoint, parse_service

_DECLARE = "declare it in settings.services if its data never changes the result"
#: Servers whose answers are unique values by design, like the clock and /dev/urandom,
#: which are not inputs either: libuuid's ``uuidd`` (``uuid_generate_time``, CPython's
#: ``uuid.uuid1()``) hands out time-based UUIDs that never repeat. Its socket is made by
#: root, in a folder only root writes. A result that depends on such a value is flaky
#: with or without memotest (``--audit`` finds it).
UNIQUE_VALUES = ("unix:/run/uuidd/request", "unix:/var/run/uuidd/request")
_STREAMS = ("stream", "seqpacket")


@dataclass(frozen=True)
class Socket:
    """One ``B`` or ``C`` record: the socket's type, its flags (or the outcome of the
    call) and the endpoint."""

    type: str
    flags: frozenset[str]
    ep: Endpoint

    @classmethod
    def parse(cls, rec: str) -> Socket:
        head, _, raw = rec.partition(" ")
        socktype, *flags = head.split(",")
        return cls(socktype, frozenset(flags), parse_endpoint(raw))

    @property
    def sharing(self) -> str | None:
        """The option that lets a process outside the tree share the port, if set."""
        if self.ep.unix is not None:
            return None
        if "reuseport" in self.flags:
            return "SO_REUSEPORT"
        if "reuseaddr" in self.flags and self.type == "dgram":
            return "SO_REUSEADDR"
        return None

    @property
    def serving(self) -> bool:
        """Whether peers reach it: a datagram socket once bound, a stream one once it
        listens."""
        return self.type == "dgram" or (self.type in _STREAMS and "listen" in self.flags)


def unix_path_not_there(rec: str) -> str | None:
    """The path of a ``C`` record that found nothing at a Unix path (``absent``)."""
    head, _, raw = rec.partition(" ")
    if ",absent" in head and raw.startswith("unix:/"):
        return raw[5:]
    return None


def unserved_endpoint(rec: str) -> str | None:
    """``TYPE ADDRESS`` of a ``C`` record that found nobody serving there: a datagram
    dropped (``unbound``) or a Unix connect refused (``inputs/unserved.py``)."""
    head, _, raw = rec.partition(" ")
    socktype, *flags = head.split(",")
    if "unbound" in flags or ("refused" in flags and raw.startswith("unix:/")):
        return f"{socktype} {raw}"
    return None


def quiet_send(rec: str) -> str | None:
    """``TYPE ADDRESS`` of a ``C`` record of a datagram that got through to a Unix path
    from a socket no one can answer (``unnamed``: ``inputs/sink.py``)."""
    head, _, raw = rec.partition(" ")
    socktype, *flags = head.split(",")
    if "unnamed" in flags and socktype == "dgram" and raw.startswith("unix:/"):
        return f"{socktype} {raw}"
    return None


def _answerable(served: Sequence[Socket]) -> bool:
    """Whether some Unix datagram socket of the tree had a name (bound, autobound) or an
    option that autobinds it at a send (``passcred``): an "unnamed" send may have come
    from it since, and a sink could answer."""
    return any(
        "passcred" in b.flags
        or (b.type == "dgram" and b.ep.unix is not None and not b.ep.unix.startswith("?"))
        for b in served
    )


def _same_unix(a: str, b: str) -> bool:
    if a.startswith("?") or b.startswith("?"):  # a name the shim could not resolve
        return False
    if a == b:
        return True
    if a.startswith("@") or b.startswith("@"):
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def _covers_all_v4(b: Endpoint, flags: frozenset[str]) -> bool:
    assert b.ip is not None
    return b.ip.is_unspecified and (b.ip.version == 4 or "v6only" not in flags)


def _covers(b: Socket, ep: Endpoint) -> bool:
    """Whether a socket bound at ``b`` gets what is sent to the specific ``ep``."""
    bip, ip = b.ep.ip, ep.ip
    if bip is None or ip is None or b.ep.port != ep.port:
        return False
    if bip == ip:
        return True
    if ip.version == 4:
        return _covers_all_v4(b.ep, b.flags)
    return bip.version == 6 and bip.is_unspecified


def _inet_served(talk: Socket, served: Sequence[Socket]) -> str | bool:
    """True if the tree alone serves where ``talk`` went; else False, or the option that
    let a process outside the tree share the port."""
    ep = talk.ep
    assert ep.ip is not None
    same = [b for b in served if b.type == talk.type and b.ep.ip is not None]
    if ep.ip.is_unspecified:
        # reaches the socket's own source address: any local one of the family (an
        # IPv6 socket's source may be an IPv4-mapped one)
        near = [b for b in same if b.ep.port == ep.port]
        whole = [b for b in near if b.serving]
        ok = any(_covers_all_v4(b.ep, b.flags) for b in whole if b.ep.ip is not None)
        if ep.ip.version == 6:
            ok = ok and any(
                b.ep.ip is not None and b.ep.ip.version == 6 and b.ep.ip.is_unspecified
                for b in whole
            )
    else:
        near = [b for b in same if _covers(b, ep)]
        ok = any(b.serving for b in near)
    for b in near:
        if b.sharing:
            return b.sharing
    return ok


def served_by_tree(talk: Socket, served: Sequence[Socket]) -> str | bool:
    """Whether a process of the tree alone served the endpoint of ``talk`` at some time of
    the run (a client that tried before its server was up is the tree's): True; else
    False, or the option that let another process share it."""
    ep = talk.ep
    if ep.unix is not None:
        return any(
            b.ep.unix is not None and b.type == talk.type and _same_unix(ep.unix, b.ep.unix)
            for b in served
        )
    if ep.ip is None:
        return False
    return _inet_served(talk, served)


def held_outside(
    connects: Iterable[str], listens: Iterable[str], which: Callable[[str], str | None]
) -> list[str]:
    """The endpoints ``which`` takes from ``connects`` (``unserved_endpoint``,
    ``quiet_send``), but those a process of the tree served: a client that tried before
    the tree's own server was up is the tree's business, whatever is there after."""
    served = [Socket.parse(rec) for rec in listens]
    out = []
    for rec in connects:
        endpoint = which(rec)
        if endpoint is not None and served_by_tree(Socket.parse(rec), served) is not True:
            out.append(endpoint)
    return out


def network_reasons(
    connects: Iterable[str],
    listens: Iterable[str],
    accepted: Iterable[str],
    sockets: Iterable[str],
    services: Sequence[str] = (),
) -> list[str]:
    """Why the network a trace used makes its result not reusable (empty: it does not)."""
    declared = [parse_service(s) for s in services]
    served = [Socket.parse(rec) for rec in listens]

    def allowed(ep: Endpoint) -> bool:
        return any(d.matches(ep) for d in declared)

    why: list[str] = []
    answerable = _answerable(served)
    for rec in sorted(connects):
        if unix_path_not_there(rec) is not None or unserved_endpoint(rec) is not None:
            continue  # an absent input (``tracer/collect.py``), or an unserved one
        if quiet_send(rec) is not None and not answerable:
            continue  # a sink input (``inputs/sink.py``)
        talk = Socket.parse(rec)
        ep = talk.ep
        if allowed(ep) or str(ep) in UNIQUE_VALUES:
            continue
        if ep.name is not None:
            why.append(
                f"looked up {ep} through the resolver (DNS), whose answer can change; "
                f"declare it in settings.services (as {ep}:*) if its answer never changes "
                "the result"
            )
            continue
        alone = served_by_tree(talk, served)
        if alone is True:
            continue
        if alone:
            why.append(
                f"connected to {ep}, which the target serves with {alone}: a process "
                f"outside it can share the port; {_DECLARE}"
            )
        elif ep.local:
            why.append(f"connected to {ep}, which no process of the target listens on; {_DECLARE}")
        else:
            why.append(f"connected to a non-loopback address: {ep} ({_DECLARE})")
    wide = {b.ep for b in served if b.type == "dgram" and b.ep.ip and not b.ep.ip.is_loopback}
    for ep in sorted(wide, key=str):
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
