"""Where a remote cache's bytes live: one small interface, an HTTP and a Redis backend.

A :class:`Backend` keeps bytes under keys of the form ``ac/<hex>`` (a target's manifest,
mutable) and ``cas/<sha256>`` (content-addressed: the key is the sha256 of the bytes).
It knows nothing of records or trust: :mod:`memotest.remote.cache` checks every blob it
fetches against its key and every manifest against its signature.

- ``http://`` / ``https://``: the plain HTTP cache protocol of bazel-remote, ccache's
  http storage and an nginx WebDAV location: ``GET``/``PUT``/``HEAD`` of ``{base}/ac/{key}``
  and ``{base}/cas/{sha256}``. Standard library only (``http.client``), one kept-alive
  connection per thread, basic auth from the URL's ``user:password@``.
- ``redis://`` / ``rediss://`` / ``unix://``: through the ``redis`` package (the
  ``memotest[redis]`` extra), imported only when such a URL is used.

Errors are of two sorts, because the cache treats them differently: :class:`RemoteDown`
(the connection failed or timed out: the remote is not used again in this build, so the
timeout is paid once, not per target) and :class:`RemoteError` (it answered, but not what
the protocol says: a 500, a 403, a refused ``PUT``).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import threading
import urllib.parse
from typing import Any, Protocol

#: Seconds to wait for a connection and for each answer, unless ``remote_timeout`` says.
DEFAULT_TIMEOUT = 5.0


class RemoteError(Exception):
    """The remote answered, but not as the protocol says (an HTTP error status, ...)."""


class RemoteDown(RemoteError):
    """The remote could not be reached, or did not answer in time."""


class Backend(Protocol):
    """A remote place that keeps bytes by key (``ac/<hex>``, ``cas/<sha256>``)."""

    url: str

    def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, None when there are none."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key``."""
        ...

    def has(self, key: str) -> bool:
        """Whether there are bytes under ``key``."""
        ...

    def close(self) -> None:
        """Drop the connections."""
        ...


def open_backend(url: str, timeout: float = DEFAULT_TIMEOUT) -> Backend:
    """The backend a URL names; ``ValueError`` for a scheme memotest does not speak,
    ``ImportError`` (naming the extra) for Redis without the ``redis`` package."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme in ("http", "https"):
        return HttpBackend(url, timeout)
    if scheme in ("redis", "rediss", "unix"):
        return RedisBackend(url, timeout)
    raise ValueError(f"remote {url!r}: the scheme must be http, https or redis")


def shown(url: str) -> str:
    """``url`` as it may be printed: without its credentials."""
    parts = urllib.parse.urlsplit(url)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


class _Connection(http.client.HTTPConnection):
    """An HTTP connection with a connect timeout of its own (``timeout`` is the read's)."""

    connect_timeout: float = DEFAULT_TIMEOUT

    def connect(self) -> None:
        self.sock = socket.create_connection((self.host, self.port), self.connect_timeout)
        self.sock.settimeout(self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _TlsConnection(http.client.HTTPSConnection):
    connect_timeout: float = DEFAULT_TIMEOUT

    def connect(self) -> None:
        timeout = self.timeout
        self.timeout = self.connect_timeout
        try:
            super().connect()
        finally:
            self.timeout = timeout
        self.sock.settimeout(timeout)


class HttpBackend:
    """The plain HTTP cache protocol (bazel-remote, ccache, nginx WebDAV)."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        parts = urllib.parse.urlsplit(url)
        self.url = shown(url)
        self._tls = parts.scheme.lower() == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port
        self._base = parts.path.rstrip("/")
        self._timeout = timeout
        self._auth: str | None = None
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            word = urllib.parse.unquote(parts.password or "")
            self._auth = "Basic " + base64.b64encode(f"{user}:{word}".encode()).decode()
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = _TlsConnection if self._tls else _Connection
            conn = cls(self._host, self._port, timeout=self._timeout)
            conn.connect_timeout = min(self._timeout, DEFAULT_TIMEOUT)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _request(self, method: str, key: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        if self._auth:
            headers["Authorization"] = self._auth
        path = urllib.parse.quote(f"{self._base}/{key}")
        for attempt in (0, 1):
            conn = self._conn()
            fresh = conn.sock is None
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    conn.close()
                return resp.status, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                conn.close()  # a kept-alive connection the server closed: once more, anew
                if fresh or attempt:
                    raise RemoteDown(f"{method} {path}: {e or type(e).__name__}") from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                what = "timed out" if isinstance(e, TimeoutError) else str(e) or type(e).__name__
                raise RemoteDown(f"{method} {path}: {what}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, key: str) -> bytes | None:
        status, data = self._request("GET", key)
        if status == 200:
            return data
        if status == 404:
            return None
        raise RemoteError(f"GET {key}: HTTP {status}")

    def put(self, key: str, data: bytes) -> None:
        status, _ = self._request("PUT", key, data)
        if status not in (200, 201, 204):
            raise RemoteError(f"PUT {key}: HTTP {status}")

    def has(self, key: str) -> bool:
        status, _ = self._request("HEAD", key)
        if status == 200:
            return True
        if status == 404:
            return False
        raise RemoteError(f"HEAD {key}: HTTP {status}")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


class RedisBackend:
    """Keys in a Redis server (``memotest/ac/...``, ``memotest/cas/...``)."""

    PREFIX = "memotest/"

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        try:
            import redis
        except ImportError:
            raise ImportError(
                f"remote {shown(url)}: Redis needs the redis package: pip install 'memotest[redis]'"
            ) from None
        self._errors = redis.exceptions
        self.url = shown(url)
        self._client: Any = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=min(timeout, DEFAULT_TIMEOUT),
            retry_on_timeout=False,
        )

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except (self._errors.ConnectionError, self._errors.TimeoutError, OSError) as e:
            raise RemoteDown(f"{what}: {e or type(e).__name__}") from None
        except self._errors.RedisError as e:
            raise RemoteError(f"{what}: {e}") from None

    def get(self, key: str) -> bytes | None:
        data = self._call(f"GET {key}", self._client.get, self.PREFIX + key)
        return None if data is None else bytes(data)

    def put(self, key: str, data: bytes) -> None:
        self._call(f"SET {key}", self._client.set, self.PREFIX + key, data)

    def has(self, key: str) -> bool:
        return bool(self._call(f"EXISTS {key}", self._client.exists, self.PREFIX + key))

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing never fails a build
            self._client.close()
