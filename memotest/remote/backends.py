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
  ``memotest[redis]`` extra), imported only when such a URL is used
  (:mod:`memotest.remote.redis_backend`).

Errors are of two sorts, because the cache treats them differently: :class:`RemoteDown`
(the connection failed or timed out: the remote is not used again in this build, so the
timeout is paid once, not per target) and :class:`RemoteError` (it answered, but not what
the protocol says: a 500, a 403, a refused ``PUT``, an answer over the size cap).

Bounds, whatever the server does: every request ends by its deadline (its start plus
``remote_timeout``, or the end of the build's phase, :attr:`deadline`, if earlier:
:mod:`memotest.remote.deadline`), and no answer is read past ``remote_max_answer`` bytes
(an HTTP answer whose length says more is refused before its body is read; Redis is asked
for at most that many bytes, ``GETRANGE``). :meth:`abort` shuts every connection at once.

A URL is checked before anything is sent (:func:`check_url`): printable ASCII only (no
control character, space, or byte that is not ASCII: percent-encode them), a host, a port
in 1-65535.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import re
import socket
import threading
import time
import urllib.parse
from typing import Any, Protocol

from memotest.remote.deadline import Watchdog

#: Seconds a request may take, unless ``remote_timeout`` says.
DEFAULT_TIMEOUT = 5.0
#: The most bytes memotest reads of one answer, unless ``remote_max_answer`` says.
DEFAULT_MAX_ANSWER = 64 << 20
#: Bytes read at once from an HTTP answer.
_CHUNK = 1 << 16


class RemoteError(Exception):
    """The remote answered, but not as the protocol says (an HTTP error status, ...)."""


class RemoteDown(RemoteError):
    """The remote could not be reached, or did not answer in time."""


class Backend(Protocol):
    """A remote place that keeps bytes by key (``ac/<hex>``, ``cas/<sha256>``)."""

    url: str
    #: The end of the current phase of the build (``time.monotonic()``), or None: no
    #: request ends later.
    deadline: float | None

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

    def abort(self) -> None:
        """Shut every connection now (from any thread); no request starts again."""
        ...


def check_url(url: str) -> str:
    """The scheme of ``url``; ``ValueError`` saying what is wrong with it (the URL shown
    without its credentials, control characters escaped)."""
    what = ascii(re.sub(r"//[^/@]*@", "//", url))
    if not url or any(not "!" <= c <= "~" for c in url):
        raise ValueError(
            f"remote {what}: a URL must be printable ASCII, with no space or control "
            "character (percent-encode the rest)"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"remote {what}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "redis", "rediss", "unix"):
        raise ValueError(f"remote {what}: the scheme must be http, https or redis")
    if scheme != "unix" and not parts.hostname:
        raise ValueError(f"remote {what}: names no host")
    if port == 0:
        raise ValueError(f"remote {what}: port 0 is no server's")
    return scheme


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


def ends_at(timeout: float, deadline: float | None) -> float:
    """When a request that starts now must end."""
    end = time.monotonic() + timeout
    return end if deadline is None else min(end, deadline)


class HttpBackend:
    """The plain HTTP cache protocol (bazel-remote, ccache, nginx WebDAV)."""

    def __init__(
        self, url: str, timeout: float = DEFAULT_TIMEOUT, max_answer: int = DEFAULT_MAX_ANSWER
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        self.url = shown(url)
        self.deadline: float | None = None
        self.max_answer = max_answer
        self._watch = Watchdog(self.abort)
        self._aborted = False
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

    def _conn(self, ends: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = _TlsConnection if self._tls else _Connection
            conn = cls(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
            with self._lock:
                if self._aborted:
                    raise RemoteDown("aborted")
                self._all.append(conn)
        left = ends - time.monotonic()
        conn.connect_timeout = max(0.001, min(self._timeout, DEFAULT_TIMEOUT, left))
        return conn

    def _request(self, method: str, key: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        if self._auth:
            headers["Authorization"] = self._auth
        path = urllib.parse.quote(f"{self._base}/{key}")
        ends = ends_at(self._timeout, self.deadline)
        token = self._watch.start(ends)
        try:
            for attempt in (0, 1):
                if self._aborted or time.monotonic() >= ends:
                    raise RemoteDown(f"{method} {path}: {self._late()}")
                conn = self._conn(ends)
                fresh = conn.sock is None
                try:
                    conn.request(method, path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = self._read(method, path, conn, resp)
                    if resp.will_close:
                        conn.close()
                    return resp.status, data
                except (
                    http.client.RemoteDisconnected,
                    ConnectionResetError,
                    BrokenPipeError,
                ) as e:
                    conn.close()  # a kept-alive connection the server closed: once more, anew
                    if fresh or attempt or self._aborted:
                        what = self._late() if self._aborted else e or type(e).__name__
                        raise RemoteDown(f"{method} {path}: {what}") from None
                except (OSError, http.client.HTTPException, ValueError) as e:
                    conn.close()
                    if self._aborted:
                        what = self._late()
                    elif isinstance(e, TimeoutError):
                        what = "timed out"
                    else:
                        what = str(e) or type(e).__name__
                    raise RemoteDown(f"{method} {path}: {what}") from None
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._watch.end(token)

    def _read(self, method: str, path: str, conn: http.client.HTTPConnection, resp: Any) -> bytes:
        """The body of ``resp``, at most ``max_answer`` bytes (:class:`RemoteError` past
        them, the connection dropped unread)."""
        length = resp.getheader("Content-Length")
        said = int(length) if length is not None and length.strip().isdigit() else None
        if method != "HEAD" and said is not None and said > self.max_answer:
            conn.close()
            raise RemoteError(f"{method} {path}: {self._too_large(said)}")
        chunks: list[bytes] = []
        size = 0
        while chunk := resp.read(min(_CHUNK, self.max_answer + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_answer:
                conn.close()
                raise RemoteError(f"{method} {path}: {self._too_large(None)}")
        if self._aborted or (method != "HEAD" and said is not None and size != said):
            conn.close()  # cut short (http.client does not say so): by the watchdog?
            what = self._late() if self._aborted else f"{size} of {said} bytes came"
            raise RemoteDown(f"{method} {path}: {what}")
        return b"".join(chunks)

    def _too_large(self, length: int | None) -> str:
        size = f" of {length} bytes," if length is not None else ""
        return f"an answer{size} over remote_max_answer ({self.max_answer} bytes)"

    def _late(self) -> str:
        return f"no answer within {self._timeout:g}s (remote_timeout)"

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            conns = list(self._all)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

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
        self._watch.stop()
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
