"""A remote cache for one build: its backend, its faults, its counts, its uploads.

:class:`RemoteCache` wraps a :class:`~memotest.remote.backends.Backend` with what a build
needs of it:

- **Faults never fail a build and never yield a hit.** Every remote call goes through
  :meth:`RemoteCache.call`: an error is counted, the first one is shown (one line naming
  the remote), and the caller goes on as if the remote had nothing. After a connection
  failure or a timeout (:class:`~memotest.remote.backends.RemoteDown`) the remote is not
  asked again in this build (a circuit breaker: the timeout is paid once, not per target).
- **Every blob is checked against its key** (:meth:`RemoteCache.get_blob`): its sha256
  must be the one it was asked by, or it is garbage (counted, no hit).
- **Uploads run in the background** (:meth:`RemoteCache.upload`, a few daemon threads),
  waited for by :meth:`RemoteCache.close` at the build's end, for at most
  ``remote_timeout`` (the upload phase); none with ``--remote-read-only``.
- **Phases are bounded** (:meth:`RemoteCache.phase`): the fetch before the build runs
  anything and the uploads at its end each end within ``remote_timeout`` (every request in
  them ends by then: :mod:`memotest.remote.deadline`), and :meth:`RemoteCache.abort`
  (Ctrl-C, SIGTERM) shuts every connection at once, waiting for nothing.
- **Counts** for the summary (:meth:`RemoteCache.summary`): hits, uploads, errors, and
  records refused for their signature (``untrusted``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TextIO, TypeVar

from memotest.check.keys import TargetKey
from memotest.remote import wire
from memotest.remote.backends import DEFAULT_TIMEOUT, Backend, RemoteDown, RemoteError
from memotest.remote.deadline import GRACE, run_all
from memotest.store import Record, Store, StoreError
from memotest.store.records import named_blobs

T = TypeVar("T")
R = TypeVar("R")

#: Threads that talk to the remote at once (downloads, and uploads in the background).
WORKERS = 8


class RemoteCache:
    """The remote of one build (see the module's docstring)."""

    def __init__(
        self,
        backend: Backend,
        *,
        read_only: bool = False,
        signer: wire.Signer | None = None,
        out: TextIO | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.backend = backend
        #: Seconds a request, and a phase of the build, may take (``remote_timeout``).
        self.timeout = timeout
        self.read_only = read_only
        self.signer = signer or wire.Signer(None)
        self.out = out
        self.hits = 0
        self.uploaded = 0
        self.errors = 0
        self.untrusted = 0
        #: Set after a connection failure or a timeout: the remote is not asked again.
        self.broken = False
        #: Set by :meth:`abort` (the build was interrupted).
        self.aborted = False
        self._warned = False
        self._lock = threading.Lock()
        self._jobs: deque[Callable[[], None]] = deque()
        self._outstanding = 0  # uploads queued or running
        self._workers = 0
        self._closing = False
        self._idle = threading.Condition(self._lock)

    @property
    def url(self) -> str:
        return self.backend.url

    # -- faults -------------------------------------------------------------------------

    def call(self, fn: Callable[[], T], default: T) -> T:
        """``fn()``, or ``default`` when the remote fails, answers garbage or is broken."""
        if self.broken:
            return default
        try:
            return fn()
        except wire.Untrusted as exc:
            self.refused(exc)
        except (RemoteError, wire.Garbage) as exc:
            self.fault(exc)
        return default

    def fault(self, exc: Exception) -> None:
        """Count an error; warn about the first; stop using a remote that is down."""
        with self._lock:
            if isinstance(exc, RemoteDown):
                if self.broken:
                    return  # a call in flight when it broke: the first one was counted
                self.broken = True
            self.errors += 1
        if self.broken:
            self.backend.abort()  # the calls in flight: nothing more is waited for
        self.warn(f"{exc}" + ("; not used for the rest of this build" * self.broken))

    def refused(self, exc: Exception) -> None:
        """Count a record or manifest whose signature does not verify."""
        with self._lock:
            self.untrusted += 1
        self.warn(f"ignored: {exc}")

    def warn(self, text: str) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        out = self.out or sys.stderr
        out.write(f"memotest: warning: remote {self.url}: {text}\n")
        out.flush()

    # -- phases -------------------------------------------------------------------------

    @contextlib.contextmanager
    def phase(self) -> Iterator[float]:
        """A phase of the build (the fetch, the uploads at its end): every request in it
        ends within ``remote_timeout`` of its start; yields its deadline."""
        deadline = time.monotonic() + self.timeout
        self.backend.deadline = deadline
        try:
            yield deadline
        finally:
            self.backend.deadline = None

    def map(self, fn: Callable[[T], R], items: Sequence[T], until: float) -> list[R | None]:
        """``fn`` of each item, in at most :data:`WORKERS` threads, by ``until``: None for
        an item that did not end in time (the remote is then expired, and not used again).
        Ctrl-C (and SIGTERM) in the wait aborts the remote and is raised at once."""
        try:
            return run_all(fn, items, WORKERS, until, self.expire)
        except KeyboardInterrupt:
            self.abort()  # the threads left behind stop talking to the remote
            raise

    def run(self, fn: Callable[[], T], default: T, until: float) -> T:
        """:meth:`call` of ``fn`` in a thread of its own, waited for by ``until`` as
        :meth:`map` waits (a name lookup that hangs does not hold the build)."""
        got = self.map(lambda _: self.call(fn, default), [None], until)[0]
        return default if got is None else got

    def expire(self) -> None:
        """The phase ran out of time: no answer is waited for again."""
        self.fault(RemoteDown(f"no answer within {self.timeout:g}s (remote_timeout)"))
        self.backend.abort()  # also when it was broken already

    def abort(self) -> None:
        """Shut every connection now (the build was interrupted): nothing is waited for,
        nothing more is uploaded."""
        with self._lock:
            self.broken = self.aborted = self._closing = True
            self._jobs.clear()
            self._idle.notify_all()
        self.backend.abort()

    # -- blobs --------------------------------------------------------------------------

    def get_blob(self, sha: str) -> bytes | None:
        """The CAS blob ``sha`` (None when the remote has none); :class:`wire.Garbage`
        when what came does not hash to it."""
        data = self.backend.get(f"cas/{sha}")
        if data is not None and wire.sha256(data) != sha:
            raise wire.Garbage(f"blob {sha[:16]}... does not match its sha256")
        return data

    def fetch_to(self, store: Store, digest: str, sha: str) -> bool:
        """Put the blob a record names as ``digest`` (travelling as ``sha``) into the local
        store; False when the remote has none. :class:`wire.Garbage` when it is not the
        blob the record names."""
        if store.has_blob(digest):
            return True
        data = self.get_blob(sha)
        if data is None:
            return False
        if store.put_blob(data) != digest:
            raise wire.Garbage(f"blob {sha[:16]}... is not the one its record names")
        return True

    def put_blob(self, data: bytes) -> str:
        limit = getattr(self.backend, "max_answer", None)
        if limit is not None and len(data) > limit:  # no build could fetch it
            raise RemoteError(
                f"not uploaded: a blob of {len(data)} bytes, over remote_max_answer ({limit})"
            )
        sha = wire.sha256(data)
        if not self.backend.has(f"cas/{sha}"):
            self.backend.put(f"cas/{sha}", data)
        return sha

    # -- uploads ------------------------------------------------------------------------

    def upload(self, store: Store, key: TargetKey, record: Record) -> None:
        """Upload a passing, cacheable record in the background (called after it was put
        in the local store, in the build's thread)."""
        if self.read_only or self.broken or record.status != "passed" or not record.cacheable:
            return
        rec = replace(record, inputs=list(record.inputs))
        blob_kinds = _blob_kinds()
        needed = list(named_blobs(rec.log_digest, rec.outputs, rec.tests_digest))
        needed += sorted({i.digest for i in rec.inputs if i.kind.value in blob_kinds})
        ac = wire.ac_key(rec.name, key, rec.recorder)
        with self._lock:
            self._jobs.append(lambda: self._upload(store, ac, rec, needed))
            self._outstanding += 1
            if self._workers < min(WORKERS, self._outstanding):
                self._workers += 1
                threading.Thread(target=self._work, name="memotest-upload", daemon=True).start()
            self._idle.notify_all()

    def _work(self) -> None:
        """An upload thread: the queued uploads, one after the other, until the cache
        closes (it keeps its connection for the next)."""
        while True:
            with self._lock:
                while not self._jobs and not self._closing:
                    self._idle.wait()
                if not self._jobs:
                    self._workers -= 1
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception as exc:  # a thread's failure is the remote's, never the build's
                self.fault(exc)
            finally:
                with self._lock:
                    self._outstanding -= 1
                    self._idle.notify_all()

    def _upload(self, store: Store, ac: str, rec: Record, needed: list[str]) -> None:
        blobs: dict[str, str] = {}
        for digest in dict.fromkeys(needed):
            try:
                data = store.read_blob(digest)
            except (OSError, ValueError, StoreError):
                return  # the local store lost it: this record does not travel
            sha = self.call(lambda data=data: self.put_blob(data), None)
            if sha is None:
                return
            blobs[digest] = sha
        body = wire.dump_record(rec, blobs, self.signer, store.roots)
        if self.call(lambda: self.put_blob(body), None) is None:
            return

        def manifest() -> bool:
            old = self.backend.get(f"ac/{ac}")
            entries: list[dict[str, object]] = []
            if old is not None:
                try:
                    entries = wire.load_manifest(ac, old, self.signer)
                except (wire.Garbage, wire.Untrusted):
                    entries = []  # replaced by one that parses and verifies
            merged = wire.merge(entries, wire.sha256(body))
            self.backend.put(f"ac/{ac}", wire.dump_manifest(ac, merged, self.signer))
            return True

        if self.call(manifest, False):
            with self._lock:
                self.uploaded += 1

    def close(self, until: float | None = None) -> None:
        """Wait for the uploads, by ``until`` (by default ``remote_timeout`` from now: the
        upload phase), and drop the connections. Uploads not done by then are dropped,
        with a warning; Ctrl-C in the wait aborts them and is raised."""
        if until is None:
            until = time.monotonic() + self.timeout
            self.backend.deadline = until
        try:
            with self._lock:
                self._closing = True
                self._idle.notify_all()
                while self._outstanding and not self.broken:
                    left = until + GRACE - time.monotonic()
                    if left <= 0:
                        break
                    self._idle.wait(left)
                late = self._outstanding > 0 and not self.broken
            if late:
                self.expire()
        except BaseException:
            self.abort()
            raise
        finally:
            self.backend.deadline = None
        self.backend.close()

    def summary(self) -> dict[str, object]:
        """The counts, for the build's summary."""
        return {
            "url": self.url,
            "hits": self.hits,
            "uploaded": self.uploaded,
            "errors": self.errors,
            "untrusted": self.untrusted,
            "read_only": self.read_only,
        }


def summary_line(counts: dict[str, object]) -> str:
    """``remote: 12 hits, 30 uploaded, 1 error`` (errors and untrusted when there are)."""

    def n(key: str, word: str, plural: str) -> str:
        v = int(counts.get(key) or 0)  # type: ignore[call-overload]
        return f"{v} {word if v == 1 else plural}"

    parts = [n("hits", "hit", "hits")]
    parts.append("read-only" if counts.get("read_only") else n("uploaded", "uploaded", "uploaded"))
    if counts.get("errors"):
        parts.append(n("errors", "error", "errors"))
    if counts.get("untrusted"):
        parts.append(n("untrusted", "untrusted", "untrusted"))
    return "remote: " + ", ".join(parts)


def _blob_kinds() -> tuple[str, ...]:
    from memotest.inputs.registry import blob_kinds

    return blob_kinds()
