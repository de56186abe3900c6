"""Network observations that carry nothing in (issue 25): a connect to a Unix path where
nothing is, or where nobody listens, and a datagram to a loopback port where no socket is
bound, observed only that nobody serves there. Held as such (``inputs/absent.py``,
``inputs/unserved.py``), the result is reused until a server appears there; a send that
reached a server stays a service use (``memotest/world/network.py``)."""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import build_statuses
from test_network import project

PY = sys.executable


def one_target(root: Path, script: str, *args: str) -> Path:
    root.mkdir()
    (root / "t.py").write_text(textwrap.dedent(script))
    argv = "".join(f', "{a}"' for a in args)
    return project(root, f'[targets.t]\ncommand = ["{PY}", "t.py"{argv}]\n')


def statuses(root: Path, n: int) -> list[str]:
    """The target's status in ``n`` builds; every build must succeed."""
    out = []
    for _ in range(n):
        code, text, st = build_statuses(root, "-v")
        assert code == 0, text
        out.append(st["t"])
    return out


def udp_bound(port: int) -> bool:
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", port))
        s.close()
        return False
    except OSError:
        return True


@pytest.mark.skipif(
    os.path.exists("/run/uuidd/request") or os.path.exists("/dev/log") or udp_bound(514),
    reason="uuidd or a syslog runs here",
)
def test_uuid1_and_syslog_without_their_daemons_are_cached(tmp_path):
    root = one_target(
        tmp_path / "p",
        """
        import logging, logging.handlers, uuid
        assert uuid.uuid1().version == 1  # libuuid tries uuidd's socket first
        log = logging.getLogger("t")
        log.addHandler(logging.handlers.SysLogHandler())  # UDP localhost:514
        try:
            log.addHandler(logging.handlers.SysLogHandler(address="/dev/log"))
        except OSError:
            pass
        log.warning("hello")
        """,
    )
    assert statuses(root, 2) == ["passed", "cached"]


def serve_unix(path: Path, kind: int) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(str(path))
    if kind == socket.SOCK_STREAM:
        s.listen()

        def loop() -> None:
            while True:
                try:
                    c, _ = s.accept()
                except OSError:
                    return
                with contextlib.suppress(OSError):  # the client may be gone
                    c.sendall(b"2")
                c.close()

        threading.Thread(target=loop, daemon=True).start()
    return s


UNIX_CLIENT = """
import socket, sys
kind = socket.SOCK_STREAM if sys.argv[2] == "stream" else socket.SOCK_DGRAM
s = socket.socket(socket.AF_UNIX, kind)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print("nobody:", e)
"""


@pytest.mark.parametrize("kind", ["stream", "dgram"])
def test_a_server_that_appears_at_an_absent_unix_path_reruns(tmp_path, kind):
    sock = tmp_path / "d" / "s.sock"  # its folder absent too, then made
    root = one_target(tmp_path / "p", UNIX_CLIENT, str(sock), kind)
    assert statuses(root, 2) == ["passed", "cached"]
    sock.parent.mkdir()
    srv = serve_unix(sock, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM)
    try:
        _, out, st = build_statuses(root, "-v")
        assert st == {"t": "passed"}, out
        assert f"{sock}: appeared" in out
        if kind == "stream":  # a stream server can answer: a service use
            assert f"connected to unix:{sock}, which no process" in out
        else:  # an unnamed datagram socket cannot be answered (test_network_sink.py)
            assert statuses(root, 1) == ["cached"]
    finally:
        srv.close()


def test_a_socket_file_that_starts_listening_reruns(tmp_path):
    """Refused: the socket file is there and nobody listens. The same socket file can
    start listening later (bound first, listen after) without the file changing."""
    sock = tmp_path / "s.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(sock))
    try:
        root = one_target(tmp_path / "p", UNIX_CLIENT, str(sock), "stream")
        assert statuses(root, 2) == ["passed", "cached"]
        srv.listen()
        _, out, st = build_statuses(root, "-v")
        assert st == {"t": "passed"}, out
        assert "a server is there now" in out
    finally:
        srv.close()


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        _, sock = self.request
        sock.sendto(b"fail", self.client_address)


UDP_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
s.sendto(b"status?", ("127.0.0.1", int(sys.argv[1])))
try:
    got = s.recvfrom(100)[0]  # a datagram socket that also receives
except TimeoutError:
    got = b"nothing"
print(got)
"""


def test_a_datagram_server_that_appears_at_a_port_nobody_had_reruns(tmp_path):
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    root = one_target(tmp_path / "p", UDP_CLIENT, str(port))
    assert statuses(root, 2) == ["passed", "cached"]
    srv = socketserver.ThreadingUDPServer(("127.0.0.1", port), _Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        _, out, st = build_statuses(root, "-v")
        assert st == {"t": "passed"}, out
        assert "a server is there now" in out
        # with the server there, the send reached it: a service use, never cached
        _, out, st = build_statuses(root, "-v")
        assert st == {"t": "passed"}, out
        assert f"connected to 127.0.0.1:{port}, which no process" in out
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_server_at_a_path_named_like_uuidds_is_a_service(tmp_path):
    """Only uuidd's own socket (made by root in /run/uuidd) hands out values that are
    not inputs; the same name elsewhere is any server."""
    sock = tmp_path / "run" / "uuidd" / "request"
    sock.parent.mkdir(parents=True)
    srv = serve_unix(sock, socket.SOCK_STREAM)
    try:
        root = one_target(tmp_path / "p", UNIX_CLIENT, str(sock), "stream")
        assert statuses(root, 2) == ["passed", "passed"]
    finally:
        srv.close()


OWN = """
import os, socket
s = socket.socket(socket.AF_UNIX)
s.bind("own.sock")
c = socket.socket(socket.AF_UNIX)
try:
    c.connect("own.sock")  # bound, not listening yet: refused
except ConnectionRefusedError:
    pass
s.listen()
c = socket.socket(socket.AF_UNIX)
c.connect("own.sock")
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d.bind("own.dgram")
q = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
q.sendto(b"x", "own.dgram")  # unnamed, to the tree's own datagram socket
for name in ("own.sock", "own.dgram"):
    os.unlink(name)
"""


def test_a_client_of_the_trees_own_unix_servers_is_reused(tmp_path):
    """Refused, or sent quietly, before or to the tree's own server: what is at the path
    after the run (nothing) is the tree's business, not an input."""
    root = one_target(tmp_path / "p", OWN)
    assert statuses(root, 2) == ["passed", "cached"]
