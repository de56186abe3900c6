"""``unserved``: an endpoint where nobody was, as the run found it.

A datagram sent to a loopback port where no socket is bound is dropped: the sender gets
nothing back, not even an error (an unconnected socket). A connect to a Unix path whose
socket file nobody listens on is refused. Either observed only that nobody serves there,
as a lookup that fails observes an absence: held as such, the result is reusable while
nobody serves there, and the target re-runs when a server appears (a syslog daemon on
UDP 514, a statsd, a server at the path). The shim writes such a ``C`` record with
``,unbound`` (it asked the kernel right after the send: ``_shim/netstate.c``)
or ``,refused``; a send that reached a socket, or a connect that succeeded, is a service
use (``memotest/world/network.py``).

The "path" of such an input is ``TYPE ADDRESS`` (``dgram inet:127.0.0.1:514``,
``stream unix:/run/x.sock``); no digest. Checked by reading ``/proc/net/udp`` and
``udp6`` (a datagram endpoint), or by connecting to the Unix path with a socket of the
same type (refused again: nobody listens; a probe that connects closes at once).
"""

from __future__ import annotations

import errno
import ipaddress
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memotest.inputs.endpoint import EndpointState
from memotest.lazy import lazy_module
from memotest.model import Kind
from memotest.world.network import unserved_endpoint
from memotest.world.services import parse_endpoint

if TYPE_CHECKING:
    import socket
else:
    socket = lazy_module("socket")  # imported when a record has an endpoint to check

_TYPES = {"stream": "SOCK_STREAM", "dgram": "SOCK_DGRAM", "seqpacket": "SOCK_SEQPACKET"}


def _udp_table(
    path: str, v6: bool
) -> Iterable[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The local addresses and ports of the sockets of one kernel UDP table."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()[1:]
    except FileNotFoundError:
        if v6:
            return  # no IPv6 on this machine
        raise
    for line in lines:
        local = line.split()[1]
        hexaddr, _, hexport = local.partition(":")
        raw = bytes.fromhex(hexaddr)
        # each 32-bit word as the kernel prints it: in this machine's byte order
        words = [
            int.from_bytes(raw[i : i + 4], "big").to_bytes(4, "little")
            for i in range(0, len(raw), 4)
        ]
        packed = b"".join(words) if sys.byteorder == "little" else raw
        ip = ipaddress.ip_address(packed)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        yield ip, int(hexport, 16)


def udp_bound(address: str) -> bool:
    """Whether a UDP socket of this machine gets a datagram sent to ``address`` (as the
    shim writes it); True when the tables cannot be read."""
    ep = parse_endpoint(address)
    if ep.ip is None:
        return True
    try:
        for v6, table in ((False, "/proc/net/udp"), (True, "/proc/net/udp6")):
            for ip, port in _udp_table(table, v6):
                if port == ep.port and (ip == ep.ip or ip.is_unspecified or ep.ip.is_unspecified):
                    return True
    except (OSError, ValueError, IndexError):
        return True
    return False


def unix_refused(socktype: str, path: str) -> bool:
    """Whether a connect to the Unix ``path`` with a socket of ``socktype`` is refused."""
    kind = getattr(socket, _TYPES.get(socktype, "SOCK_STREAM"))
    with socket.socket(socket.AF_UNIX, kind) as s:
        s.setblocking(False)
        try:
            s.connect(path)
        except OSError as exc:
            return exc.errno == errno.ECONNREFUSED
    return False


def nobody_serves(endpoint: str) -> bool:
    """Whether nobody serves at ``endpoint`` (``TYPE ADDRESS``) now."""
    socktype, _, address = endpoint.partition(" ")
    if address.startswith("unix:/"):
        return unix_refused(socktype, address[5:])
    if socktype == "dgram" and address.startswith("inet"):
        return not udp_bound(address)
    return False


class Unserved(EndpointState):
    kind = Kind.UNSERVED
    went = "a server appeared there while the target ran"
    now = "a server is there now"

    def pick(self, record: str) -> str | None:
        return unserved_endpoint(record)

    def holds(self, endpoint: str) -> bool:
        return nobody_serves(endpoint)

    def words(self, endpoint: str) -> str:
        return _words(endpoint)


def _words(endpoint: str) -> str:
    socktype, _, address = endpoint.partition(" ")
    return f"{socktype} {parse_endpoint(address)}"


KIND = Unserved()
