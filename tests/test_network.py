"""The network on real processes: a server the target did not start makes its result not
reusable until the user declares it in ``services``; servers the target starts itself stay
fine; datagrams, raw ``syscall()`` and ``io_uring`` are seen too (``memotest/world/services.py``,
``memotest/_shim/net.c``). No traffic leaves the machine: servers are on loopback or Unix
sockets, and the one datagram goes to TEST-NET ``192.0.2.1``, which routes nowhere."""

from __future__ import annotations

import os
import socketserver
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import build_statuses, memotest

PY = sys.executable
DECLARE = "declare it in settings.services if its data never changes the result"


class _Value(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(self.server.value.encode())  # type: ignore[attr-defined]


@pytest.fixture
def tcp_server() -> Iterator[socketserver.TCPServer]:
    """A loopback server outside any target: answers each connection with ``.value``."""
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Value)
    srv.value = "1"  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def project(root: Path, targets: str, settings: str = "") -> Path:
    root.mkdir(exist_ok=True)
    (root / "memotest.toml").write_text(
        textwrap.dedent(f"[settings]\n{settings}\n" if settings else "") + textwrap.dedent(targets)
    )
    return root


CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
got = s.recv(100).decode()
print("value", got)
sys.exit(0 if got == "1" else 1)
"""


def test_a_loopback_server_outside_the_target_needs_a_declaration(tmp_path, tcp_server):
    port = tcp_server.server_address[1]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "client.py").write_text(CLIENT)
    targets = f"""
        [targets.client]
        command = ["{PY}", "client.py", "{port}"]
    """
    root = project(tmp_path / "p", targets)
    for _ in range(2):
        code, out, st = build_statuses(root, "-v")
        assert code == 0, out
        assert st == {"client": "passed"}, out
    reason = f"connected to 127.0.0.1:{port}, which no process of the target listens on"
    assert reason in out and DECLARE in out
    assert reason in memotest("explain", "client", cwd=root).stdout.decode()

    # Declared: the user vouches for it; declaring is part of the key, so it re-checks.
    project(root, targets, f'services = ["127.0.0.1:{port}"]')
    assert build_statuses(root)[2] == {"client": "passed"}
    assert build_statuses(root)[2] == {"client": "cached"}
    project(root, targets, 'services = ["localhost:*"]')
    assert build_statuses(root)[2] == {"client": "passed"}
    assert build_statuses(root)[2] == {"client": "cached"}
    # Taken back: the result is checked again (and is not reusable any more).
    project(root, targets)
    for _ in range(2):
        assert build_statuses(root)[2] == {"client": "passed"}


def test_a_unix_socket_outside_the_target_needs_a_declaration(tmp_path):
    sock_path = tmp_path / "outside.sock"
    srv = socketserver.ThreadingUnixStreamServer(str(sock_path), _Value)
    srv.value = "1"  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        (tmp_path / "p").mkdir()
        (tmp_path / "p" / "client.py").write_text(
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "s.connect(sys.argv[1])\n"
            "print(s.recv(10))\n"
        )
        targets = f"""
            [targets.client]
            command = ["{PY}", "client.py", "{sock_path}"]
        """
        root = project(tmp_path / "p", targets)
        for _ in range(2):
            _, out, st = build_statuses(root, "-v")
            assert st == {"client": "passed"}, out
        assert f"connected to unix:{sock_path}, which no process" in out
        project(root, targets, f'services = ["unix:{sock_path}"]')
        assert build_statuses(root)[2] == {"client": "passed"}
        assert build_statuses(root)[2] == {"client": "cached"}
    finally:
        srv.shutdown()
        srv.server_close()


OWN_SERVERS = """
import os, socket, subprocess, sys, threading

# A server thread on every address (0.0.0.0, port 0), reached through 127.0.0.1.
srv = socket.socket()
srv.bind(("", 0))
srv.listen()
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept()
    c.sendall(b"1")
    c.close()
threading.Thread(target=serve).start()
assert socket.create_connection(("127.0.0.1", port), timeout=5).recv(1) == b"1"

# A server in a child process, on a Unix socket and an abstract one.
child = subprocess.Popen([sys.executable, "-c", '''
import socket, sys
for name in (sys.argv[1], "\\\\0memotest-test-%d" % __import__("os").getppid()):
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)
    s.listen()
    print("ready", flush=True)
    c, _ = s.accept()
    c.sendall(b"2")
    c.close()
''', "own.sock"], stdout=subprocess.PIPE)
for name in ("own.sock", "\\0memotest-test-%d" % os.getpid()):
    assert child.stdout.readline() == b"ready\\n"
    c = socket.socket(socket.AF_UNIX)
    c.connect(name)
    assert c.recv(1) == b"2"
child.wait()
os.unlink("own.sock")

# A socketpair talks to nobody else.
a, b = socket.socketpair()
a.sendall(b"x")
assert b.recv(1) == b"x"
print("ok")
"""


def test_servers_the_target_starts_itself_stay_reusable(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "own.py").write_text(OWN_SERVERS)
    root = project(
        tmp_path / "p",
        f"""
        [targets.own]
        command = ["{PY}", "own.py"]
        """,
    )
    code, out, st = build_statuses(root, "-v")
    assert code == 0 and st == {"own": "passed"}, out
    code, out, st = build_statuses(root, "-v")
    assert st == {"own": "cached"}, out


def run_twice(tmp_path: Path, script: str, *args: str) -> str:
    """Builds a one-target project twice; the target must run both times. Returns the
    second build's verbose output."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "t.py").write_text(textwrap.dedent(script))
    argv = ", ".join(f'"{a}"' for a in args)
    root = project(
        tmp_path / "p",
        f"""
        [targets.t]
        command = ["{PY}", "t.py"{", " + argv if argv else ""}]
        """,
    )
    out = ""
    for _ in range(2):
        code, out, st = build_statuses(root, "-v")
        assert code == 0, out
        assert st == {"t": "passed"}, out
    return out


def test_a_datagram_to_another_machine_is_not_reusable(tmp_path):
    out = run_twice(
        tmp_path,
        """
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.sendto(b"x", ("192.0.2.1", 9))  # TEST-NET-1: routed nowhere
        except OSError:
            pass  # no route on this machine: the attempt is what counts
        """,
    )
    assert "connected to a non-loopback address: 192.0.2.1:9" in out


def test_a_raw_syscall_connect_is_seen(tmp_path, tcp_server):
    port = tcp_server.server_address[1]
    out = run_twice(
        tmp_path,
        """
        import ctypes, socket, struct, sys
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        s = socket.socket()
        addr = struct.pack("!HH4s8x", socket.AF_INET, int(sys.argv[1]), bytes([127, 0, 0, 1]))
        addr = bytes([addr[1], addr[0]]) + addr[2:]  # sa_family is host order
        buf = ctypes.create_string_buffer(addr, len(addr))
        assert libc.syscall(42, s.fileno(), buf, len(addr)) == 0  # SYS_connect (x86-64)
        print(s.recv(10))
        """,
        str(port),
    )
    assert f"connected to 127.0.0.1:{port}, which no process" in out


def io_uring_works() -> bool:
    """Whether this machine lets a process set up an io_uring (x86-64 numbers)."""
    if os.uname().machine != "x86_64":
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(425, ctypes.c_uint(4), (ctypes.c_char * 120)())
    if fd < 0:
        return False
    os.close(fd)
    return True


@pytest.mark.skipif(not io_uring_works(), reason="io_uring is not available here")
def test_io_uring_makes_the_trace_incomplete(tmp_path):
    out = run_twice(
        tmp_path,
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        params = (ctypes.c_char * 120)()
        fd = libc.syscall(425, ctypes.c_uint(4), params)  # SYS_io_uring_setup
        assert fd >= 0
        os.close(fd)
        """,
    )
    assert "trace incomplete: io_uring_setup" in out


def test_a_bad_services_entry_is_a_config_error(tmp_path):
    root = project(
        tmp_path / "p",
        f"""
        [targets.t]
        command = ["{PY}", "-c", "pass"]
        """,
        'services = ["redis"]',
    )
    code, out, _ = build_statuses(root)
    assert code == 2, out
    assert "memotest.toml:2" in out and "HOST:PORT" in out and "Traceback" not in out


@pytest.mark.parametrize(
    "entry",
    ["[::1", "[::1]:80:1", "256.1.1.1:80", "::1:80", "127.0.0.1:0", "[not-v6]:80", "a b:80"],
)
def test_a_services_entry_that_would_match_nothing_is_a_config_error(tmp_path, entry):
    root = project(
        tmp_path / "p",
        f"""
        [targets.t]
        command = ["{PY}", "-c", "pass"]
        """,
        f"services = [{entry!r}]".replace("'", '"'),
    )
    code, out, _ = build_statuses(root)
    assert code == 2, out
    assert "memotest.toml:2" in out and entry in out and "Traceback" not in out


def _hosts_name_of_another_address() -> str | None:
    """A name /etc/hosts maps to a non-loopback address (no DNS query leaves the machine)."""
    try:
        lines = Path("/etc/hosts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and not fields[0].startswith(("127.", "::1", "fe", "ff")):
            return fields[1]
    return None


@pytest.mark.skipif(
    _hosts_name_of_another_address() is None, reason="no /etc/hosts name of another address"
)
def test_a_name_looked_up_is_seen(tmp_path):
    name = _hosts_name_of_another_address()
    out = run_twice(tmp_path, "import socket, sys\nsocket.getaddrinfo(sys.argv[1], 80)\n", name)
    assert f"looked up {name} through the resolver" in out
