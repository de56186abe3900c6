"""A datagram to a Unix log sink from a socket no one can answer (``inputs/sink.py``):
reused while the sink is there; every way an answer could come back stays a service use.
The sink is a datagram socket at a path in ``tmp_path`` that answers every sender it can
(an attacker's sink, not a quiet journald)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_network_unserved import one_target, statuses


@pytest.fixture
def sink(tmp_path) -> Iterator[Path]:
    """A Unix datagram socket at ``tmp_path/log.sock`` that answers ``b"2"`` to every
    datagram from a named sender, and writes ``b"3"`` to every descriptor passed to it."""
    path = tmp_path / "log.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))

    def loop() -> None:
        while True:
            try:
                _, fds, _, peer = socket.recv_fds(s, 100, 4)
            except OSError:
                return
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.write(fd, b"3")
                os.close(fd)
            if peer:
                with contextlib.suppress(OSError):
                    s.sendto(b"2", peer)

    threading.Thread(target=loop, daemon=True).start()
    yield path
    s.close()


QUIET = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.connect(sys.argv[1])
    s.send(b"<14>hello")
    print("logged")
except OSError as e:
    print("no sink:", e)
"""


def test_a_quiet_send_to_a_sink_is_reused_while_the_sink_is_there(tmp_path, sink):
    root = one_target(tmp_path / "p", QUIET, str(sink))
    assert statuses(root, 2) == ["passed", "cached"]
    os.unlink(sink)  # the sink goes: the send would now fail
    assert statuses(root, 2) == ["passed", "cached"]  # held as absent, then


ANSWERED = {
    "bound": """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\\0memotest-client-%d" % os.getpid())  # a name: the sink can answer
s.settimeout(5)
s.connect(sys.argv[1])
s.send(b"status?")
print(s.recv(10))
""",
    "passcred": """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # autobinds at the next send
s.send(b"status?")
print(s.recv(10))
""",
    "rights": """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(sys.argv[1])
r, w = os.pipe()
socket.send_fds(s, [b"status?"], [w])  # the sink writes into the pipe
os.close(w)
print(os.read(r, 10))
""",
}


@pytest.mark.parametrize("how", sorted(ANSWERED))
def test_a_sink_that_can_answer_is_a_service(tmp_path, sink, how):
    root = one_target(tmp_path / "p", ANSWERED[how], str(sink))
    assert statuses(root, 2) == ["passed", "passed"]


def test_a_sink_answering_a_named_socket_of_the_tree_is_a_service(tmp_path, sink):
    """The tree names one datagram socket and sends quietly from another: the shim
    cannot tell which sent what later, so neither is trusted."""
    script = QUIET.replace(
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n",
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "named = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "named.bind('\\0memotest-named-%d' % __import__('os').getpid())\n",
    )
    root = one_target(tmp_path / "p", script, str(sink))
    assert statuses(root, 2) == ["passed", "passed"]
