"""Who reaches a socket the tree bound: every property of a bind that decides which peers
get there (``memotest/world/services.py``, issue 27). Each test is an attack: the target binds
something that looks like the endpoint it then talks to, while a server outside the tree
answers there; the result must not be reused. All on loopback (127.0.0.0/8, ``::1``) and
abstract Unix names."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import build_statuses
from test_network import project

PY = sys.executable
REUSEPORT = getattr(socket, "SO_REUSEPORT", 15)


def serve_stream(srv: socket.socket, value: bytes = b"1") -> None:
    """Answers every connection to the listening ``srv`` with ``value``, until closed."""

    def loop() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.sendall(value)
            c.close()

    threading.Thread(target=loop, daemon=True).start()


def serve_datagrams(srv: socket.socket, value: bytes = b"1") -> None:
    """Answers every datagram ``srv`` receives with ``value``, until closed."""

    def loop() -> None:
        while True:
            try:
                _, peer = srv.recvfrom(100)
                srv.sendto(value, peer)
            except OSError:
                return

    threading.Thread(target=loop, daemon=True).start()


@pytest.fixture
def outside() -> Iterator[list[socket.socket]]:
    """Sockets of servers outside any target, closed at the end."""
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


def tcp_outside(
    outside: list[socket.socket], host: str = "127.0.0.1", port: int = 0, reuseport: bool = False
) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family)
    if reuseport:
        s.setsockopt(socket.SOL_SOCKET, REUSEPORT, 1)
    s.bind((host, port))
    s.listen()
    outside.append(s)
    serve_stream(s)
    return s.getsockname()[1]


def not_reusable(tmp_path: Path, script: str, *args: str) -> str:
    """Builds a one-target project twice: the target must run both times (a replay
    would be a false skip). Returns the second build's verbose output."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "t.py").write_text(textwrap.dedent(script))
    argv = "".join(f', "{a}"' for a in args)
    project(root, f'[targets.t]\ncommand = ["{PY}", "t.py"{argv}]\n')
    out = ""
    for _ in range(2):
        code, out, st = build_statuses(root, "-v")
        assert code == 0, out
        assert st == {"t": "passed"}, out
    return out


def test_a_datagram_bind_does_not_serve_a_stream_port(tmp_path, outside):
    port = tcp_outside(outside)
    out = not_reusable(
        tmp_path,
        """
        import socket, sys
        port = int(sys.argv[1])
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", port))  # the same number, another protocol
        print(socket.create_connection(("127.0.0.1", port), timeout=5).recv(10))
        """,
        str(port),
    )
    assert f"connected to 127.0.0.1:{port}, which no process of the target" in out


def test_a_v6only_wildcard_does_not_serve_ipv4(tmp_path, outside):
    port = tcp_outside(outside)
    not_reusable(
        tmp_path,
        """
        import socket, sys
        port = int(sys.argv[1])
        s = socket.socket(socket.AF_INET6)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind(("::", port))
        s.listen()
        print(socket.create_connection(("127.0.0.1", port), timeout=5).recv(10))
        """,
        str(port),
    )


def test_an_ipv6_bind_does_not_serve_ipv4_nor_the_reverse(tmp_path, outside):
    port = tcp_outside(outside)  # 127.0.0.1
    not_reusable(
        tmp_path,
        """
        import socket, sys
        port = int(sys.argv[1])
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", port))
        s.listen()
        print(socket.create_connection(("127.0.0.1", port), timeout=5).recv(10))
        """,
        str(port),
    )


def test_a_shared_port_is_not_the_trees(tmp_path, outside):
    """SO_REUSEPORT: the kernel spreads connections over every socket of the group,
    whoever opened it (any process of the same user)."""
    port = tcp_outside(outside, reuseport=True)
    out = not_reusable(
        tmp_path,
        """
        import socket, sys
        port = int(sys.argv[1])
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        """,
        str(port),
    )
    assert "SO_REUSEPORT" in out


@pytest.fixture
def joiner(tmp_path) -> Iterator[tuple[Path, list]]:
    """An outside server that joins the port the target writes to the marker file, once
    it can, at each run: ``joiner[1]`` is given ``(kind, opt)``, the socket type and the
    option the outside socket needs. The marker is removed once joined."""
    marker = tmp_path / "shared"
    spec: list = []
    stop = threading.Event()
    socks: list[socket.socket] = []

    def join() -> None:
        while not stop.is_set():
            if not marker.exists() or not spec:
                stop.wait(0.02)
                continue
            kind, opt = spec[0]
            s = socket.socket(socket.AF_INET, kind)
            s.setsockopt(socket.SOL_SOCKET, opt, 1)
            try:
                s.bind(("127.0.0.1", int(marker.read_text())))
            except OSError:
                s.close()
                stop.wait(0.02)
                continue
            socks.append(s)
            if kind == socket.SOCK_STREAM:
                s.listen()
                serve_stream(s)
            else:
                serve_datagrams(s)
            marker.unlink()

    threading.Thread(target=join, daemon=True).start()
    yield marker, spec
    stop.set()
    for s in socks:
        s.close()


SHARE = """
import os, socket, sys, time
def share(port):
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while os.path.exists(sys.argv[1]):  # until the outside socket joined
        time.sleep(0.02)
"""


def test_a_port_shared_after_listen_is_not_the_trees(tmp_path, joiner):
    """SO_REUSEPORT set on a socket already listening lets another process join it."""
    marker, spec = joiner
    spec.append((socket.SOCK_STREAM, REUSEPORT))
    not_reusable(
        tmp_path,
        SHARE
        + """
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
port = s.getsockname()[1]
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
share(port)
for _ in range(50):  # until a connection lands on the other member
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    c.settimeout(0.2)
    try:
        if c.recv(1) == b"1":
            break
    except TimeoutError:
        pass
""",
        str(marker),
    )


def test_a_datagram_port_shared_by_address_is_not_the_trees(tmp_path, joiner):
    """Datagram sockets with SO_REUSEADDR share an address and port, and the one bound
    last gets the datagrams: here a socket outside the tree."""
    marker, spec = joiner
    spec.append((socket.SOCK_DGRAM, socket.SO_REUSEADDR))
    out = not_reusable(
        tmp_path,
        SHARE
        + """
mine = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
mine.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
mine.bind(("127.0.0.1", 0))
port = mine.getsockname()[1]
share(port)
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(5)
c.sendto(b"?", ("127.0.0.1", port))
print(c.recvfrom(10))
""",
        str(marker),
    )
    assert "SO_REUSEADDR" in out


def test_a_stream_bind_without_listen_serves_nobody(tmp_path, joiner):
    """A stream socket bound but not listening (a client choosing its source port, with
    SO_REUSEADDR) leaves the port to a server that binds and listens there after it."""
    marker, spec = joiner
    spec.append((socket.SOCK_STREAM, socket.SO_REUSEADDR))
    out = not_reusable(
        tmp_path,
        SHARE
        + """
mine = socket.socket()
mine.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
mine.bind(("127.0.0.1", 0))
port = mine.getsockname()[1]
share(port)
print(socket.create_connection(("127.0.0.1", port), timeout=5).recv(10))
""",
        str(marker),
    )
    assert "which no process of the target listens on" in out


def test_a_connect_to_the_unspecified_address_is_not_served_by_one_loopback(tmp_path, outside):
    """``connect(0.0.0.0:P)`` reaches the socket's own source address: here 127.0.0.5,
    served from outside, while the tree serves 127.0.0.1:P only."""
    port = tcp_outside(outside, "127.0.0.5")
    not_reusable(
        tmp_path,
        """
        import socket, sys
        port = int(sys.argv[1])
        s = socket.socket()
        s.bind(("127.0.0.1", port))
        s.listen()
        c = socket.socket()
        c.bind(("127.0.0.5", 0))
        c.connect(("0.0.0.0", port))
        print(c.getpeername(), c.recv(10))
        """,
        str(port),
    )


def test_abstract_names_that_differ_in_a_nul_byte_are_different(tmp_path, outside):
    name = f"memotest-{uuid.uuid4().hex}"
    o = socket.socket(socket.AF_UNIX)
    o.bind(f"\0{name}\0x")
    o.listen()
    outside.append(o)
    serve_stream(o)
    not_reusable(
        tmp_path,
        """
        import socket, sys
        name = sys.argv[1]
        mine = socket.socket(socket.AF_UNIX)
        mine.bind("\\0" + name + "@x")  # written like the other one's NUL before
        mine.listen()
        c = socket.socket(socket.AF_UNIX)
        c.connect("\\0" + name + "\\0x")
        print(c.recv(10))
        """,
        name,
    )


def test_an_abstract_name_the_kernel_chose_is_the_trees(tmp_path):
    """``bind("")`` autobinds an abstract name no one else can hold: a server there, and
    its client, stay reusable (the NUL-byte test above is the attack on names)."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "t.py").write_text(
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.bind('')\n"
        "s.listen()\n"
        "socket.socket(socket.AF_UNIX).connect(s.getsockname())\n"
    )
    project(root, f'[targets.t]\ncommand = ["{PY}", "t.py"]\n')
    assert [build_statuses(root)[2]["t"] for _ in range(2)] == ["passed", "cached"]


def _netns_works() -> bool:
    try:
        return (
            subprocess.run(
                [
                    "unshare",
                    "-rn",
                    "sh",
                    "-c",
                    "ip link set lo up && echo 1 > /proc/sys/net/ipv6/bindv6only",
                ],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


NETNS_DRIVER = """
import json, socket, subprocess, sys, threading
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
port = srv.getsockname()[1]
def serve():
    while True:
        c, _ = srv.accept()
        c.sendall(b"1")
        c.close()
threading.Thread(target=serve, daemon=True).start()
with open("t.py", "w") as f:
    f.write('''
import socket
s = socket.socket(socket.AF_INET6)  # IPV6_V6ONLY from net.ipv6.bindv6only, here 1
s.bind(("::", %d))
s.listen()
print(socket.create_connection(("127.0.0.1", %d), timeout=5).recv(10))
''' % (port, port))
with open("memotest.toml", "w") as f:
    f.write('[targets.t]\\ncommand = ["%s", "t.py"]\\n' % sys.executable)
out = []
for _ in range(2):
    subprocess.run([sys.executable, "-m", "memotest", "build", "-v", "--json-report", "../r.json"],
                   check=False)
    out.append({t["name"]: t["status"] for t in json.load(open("../r.json"))["targets"]})
print(json.dumps(out))
"""


@pytest.mark.skipif(not _netns_works(), reason="no user and network namespaces here")
def test_the_bindv6only_default_is_seen(tmp_path):
    """``net.ipv6.bindv6only=1`` makes every ``::`` bind IPv6-only, without any option:
    set in a network namespace of its own, with the outside server inside it."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "driver.py").write_text(NETNS_DRIVER)
    proc = subprocess.run(
        [
            "unshare",
            "-rn",
            "sh",
            "-c",
            f"ip link set lo up && echo 1 > /proc/sys/net/ipv6/bindv6only && {PY} driver.py",
        ],
        cwd=root,
        capture_output=True,
        timeout=120,
        env={**os.environ},
    )
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 0, out
    import json

    assert json.loads(proc.stdout.decode().splitlines()[-1]) == [
        {"t": "passed"},
        {"t": "passed"},
    ], out
