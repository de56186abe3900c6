"""Real cache servers for the remote's tests, on 127.0.0.1 with free ports.

- :func:`redis_server`: ``redis-server`` with no persistence, in a tmp folder;
- :func:`nginx_dav`: nginx with a WebDAV location (``dav_methods PUT DELETE;
  create_full_put_path on;``) over a folder in tmp: the plain HTTP cache protocol that
  bazel-remote and ccache's http storage speak;
- :class:`FakeServer`: a tiny ``http.server`` in a thread whose answers a test chooses
  (500s, garbage), and :func:`silent_server`, a socket that listens and never reads.

Each skips its test, naming the package, when its program is missing (``.ci/run``
installs ``redis-server nginx libnginx-mod-http-dav-ext``).
"""

from __future__ import annotations

import contextlib
import http.server
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text() if log and log.exists() else ""
            raise RuntimeError(f"{what} exited ({proc.returncode}): {text}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


@dataclass
class Server:
    """A running server: its URL, its process, its folder."""

    url: str
    proc: subprocess.Popen
    folder: Path
    port: int

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def redis_server(folder: Path) -> Iterator[Server]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    pytest.importorskip("redis", reason="the redis package (memotest[redis]) is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    args += ["no", "--dir", str(folder), "--logfile", str(folder / "redis.log")]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, proc, "redis-server", folder / "redis.log")
        yield Server(f"redis://127.0.0.1:{port}/0", proc, folder, port)
    finally:
        _stop(proc)


_NGINX_CONF = """\
{modules}
daemon off;
master_process on;
worker_processes 1;
user root;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{port};
        location /cache/ {{
            root {prefix}/data;
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
    }}
}}
"""


@contextlib.contextmanager
def nginx_dav(folder: Path) -> Iterator[Server]:
    exe = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if exe is None:
        pytest.skip("nginx is not installed (Debian packages nginx libnginx-mod-http-dav-ext)")
    for sub in ("tmp", "data/cache"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    module = Path("/usr/lib/nginx/modules/ngx_http_dav_ext_module.so")
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(
        _NGINX_CONF.format(
            modules=f"load_module {module};" if module.exists() else "",
            prefix=folder,
            port=port,
        )
    )
    proc = subprocess.Popen(
        [exe, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_port(port, proc, "nginx", folder / "error.log")
        yield Server(f"http://127.0.0.1:{port}/cache", proc, folder / "data" / "cache", port)
    finally:
        _stop(proc)


@dataclass
class FakeServer:
    """An HTTP server whose every answer ``respond(method, path, body)`` chooses, as
    ``(status, body)``; it keeps what was PUT (``store``), like a real one, by default."""

    respond: Callable[[str, str, bytes], tuple[int, bytes]] | None = None
    store: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        self.requests.append(f"{method} {path}")
        if self.respond is not None:
            return self.respond(method, path, body)
        if method == "PUT":
            self.store[path] = body
            return 201, b""
        if path in self.store:
            return 200, self.store[path]
        return 404, b""


@contextlib.contextmanager
def fake_server(server: FakeServer) -> Iterator[FakeServer]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _do(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            status, data = server.answer(self.command, self.path, body)
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_HEAD = _do

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/c"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A URL whose server accepts connections and never reads nor answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/c"
    finally:
        sock.close()
