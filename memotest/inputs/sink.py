"""``sink``: a Unix path where a datagram socket took what the run sent, and could send
nothing back.

A Unix datagram socket with no name (never bound, not autobound: no ``SO_PASSCRED``) can
receive nothing: no one has an address to send to it, and a descriptor is passed only
with ``SCM_RIGHTS``, which the shim sees (``rights``). So a datagram it sends to a log
sink (journald's ``/dev/log``, a syslog daemon's socket) brings nothing into the run but
whether the send succeeded: while a datagram socket is bound at the path, every build
would see that. The shim writes such a ``C`` record ``unnamed``
(``memotest/_shim/net.c``); ``memotest/world/network.py`` trusts it unless a Unix datagram
socket of the tree had a name or ``SO_PASSCRED`` (it could be the sender, then
answerable).

The "path" of such an input is ``TYPE ADDRESS`` (``dgram unix:/dev/log``); no digest.
Checked by connecting a datagram socket to the path (nothing is sent): it holds while
that connect succeeds. When the sink goes, the target re-runs (its send then fails).
Out of reach: an error code that depends on the sink's load (``EAGAIN`` when its queue
is full), as timing is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memotest.inputs.endpoint import EndpointState
from memotest.lazy import lazy_module
from memotest.model import Kind
from memotest.world.network import quiet_send

if TYPE_CHECKING:
    import socket
else:
    socket = lazy_module("socket")  # imported when a record has a sink to check


def sink_there(endpoint: str) -> bool:
    """Whether a datagram socket is bound at the Unix path of ``endpoint``."""
    _, _, address = endpoint.partition(" ")
    if not address.startswith("unix:/"):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.connect(address[5:])
        except OSError:
            return False
    return True


class Sink(EndpointState):
    kind = Kind.SINK
    went = "the datagram socket there went while the target ran"
    now = "no datagram socket is there now"

    def pick(self, record: str) -> str | None:
        return quiet_send(record)

    def holds(self, endpoint: str) -> bool:
        return sink_there(endpoint)


KIND = Sink()
