"""The Redis backend of the remote cache (``redis://``, ``rediss://``, ``unix://``),
through the ``redis`` package (the ``memotest[redis]`` extra): the bounds of
:mod:`memotest.remote.backends` (a deadline per request, at most ``remote_max_answer``
bytes of an answer, :meth:`RedisBackend.abort`) hold here too."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from memotest.remote.backends import (
    DEFAULT_MAX_ANSWER,
    DEFAULT_TIMEOUT,
    RemoteDown,
    RemoteError,
    ends_at,
    shown,
)
from memotest.remote.deadline import Watchdog


class RedisBackend:
    """Keys in a Redis server (``memotest/ac/...``, ``memotest/cas/...``)."""

    PREFIX = "memotest/"

    def __init__(
        self, url: str, timeout: float = DEFAULT_TIMEOUT, max_answer: int = DEFAULT_MAX_ANSWER
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ImportError(
                f"remote {shown(url)}: Redis needs the redis package: pip install 'memotest[redis]'"
            ) from None
        self._errors = redis.exceptions
        self.url = shown(url)
        self.deadline: float | None = None
        self._timeout = timeout
        self.max_answer = max_answer
        self._watch = Watchdog(self.abort)
        self._aborted = False
        self._client: Any = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=min(timeout, DEFAULT_TIMEOUT),
            retry_on_timeout=False,
            retry=Retry(NoBackoff(), 0),  # a retry would pay the timeout again
        )

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        with self._bounded(what):
            try:
                return fn(*args)
            except (self._errors.ConnectionError, self._errors.TimeoutError, OSError) as e:
                raise RemoteDown(f"{what}: {e or type(e).__name__}") from None
            except self._errors.RedisError as e:
                raise RemoteError(f"{what}: {e}") from None

    @contextlib.contextmanager
    def _bounded(self, what: str) -> Iterator[None]:
        """The request's deadline: past it the watchdog shuts the connections, and what
        the client then raises (whatever it is) is a :class:`RemoteDown`."""
        late = f"{what}: no answer within {self._timeout:g}s (remote_timeout)"
        if self._aborted:
            raise RemoteDown(late)
        ends = ends_at(self._timeout, self.deadline)
        if time.monotonic() >= ends:
            raise RemoteDown(late)
        token = self._watch.start(ends)
        try:
            yield
        except RemoteError:
            if self._aborted:
                raise RemoteDown(late) from None
            raise
        except Exception:
            if self._aborted:  # the client's own state, torn under it by the watchdog
                raise RemoteDown(late) from None
            raise
        finally:
            self._watch.end(token)

    def get(self, key: str) -> bytes | None:
        def capped() -> tuple[Any, Any]:
            pipe = self._client.pipeline(transaction=True)
            pipe.exists(self.PREFIX + key)
            pipe.getrange(self.PREFIX + key, 0, self.max_answer)  # at most max + 1 bytes
            exists, data = pipe.execute()
            return exists, data

        exists, data = self._call(f"GET {key}", capped)
        if not exists:
            return None
        if len(data) > self.max_answer:
            raise RemoteError(
                f"GET {key}: an answer over remote_max_answer ({self.max_answer} bytes)"
            )
        return bytes(data)

    def put(self, key: str, data: bytes) -> None:
        self._call(f"SET {key}", self._client.set, self.PREFIX + key, data)

    def has(self, key: str) -> bool:
        return bool(self._call(f"EXISTS {key}", self._client.exists, self.PREFIX + key))

    def abort(self) -> None:
        self._aborted = True
        with contextlib.suppress(Exception):  # the connections in use too, from any thread
            self._client.connection_pool.disconnect(inuse_connections=True)

    def close(self) -> None:
        self._watch.stop()
        with contextlib.suppress(Exception):  # closing never fails a build
            self._client.close()
