"""Cooperation with a GNU make jobserver (``make -j``).

When ``MAKEFLAGS`` carries ``--jobserver-auth=fifo:PATH`` (make 4.4) or ``R,W``
descriptors (make 4.3 and older, passed to recipes marked ``+`` or calling ``$(MAKE)``),
every target beyond the first one running needs a token read from the jobserver, and
every token is written back when its target ends, also on Ctrl-C and on errors. A reader
thread does the blocking reads, so the build loop never blocks on the pipe.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading

_AUTH = re.compile(r"--jobserver-(?:auth|fds)=(\S+)")


class Jobserver:
    """Tokens from make's jobserver. ``available`` says whether one is ready now."""

    def __init__(self, rfd: int, wfd: int, owned: bool) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self.owned = owned  # we opened the fifo ourselves and must close it
        self.held: list[bytes] = []
        self._got: queue.Queue[bytes] = queue.Queue()
        self._wanted = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._reader, name="memotest-jobserver", daemon=True).start()

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Jobserver | None:
        """The jobserver named in ``MAKEFLAGS``, or None (no make, or not usable)."""
        flags = (environ if environ is not None else os.environ).get("MAKEFLAGS", "")
        found = _AUTH.findall(flags)
        if not found:
            return None
        auth = found[-1]  # the last one wins, as in make
        if auth.startswith("fifo:"):
            try:
                fd = os.open(auth[5:], os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                return None
            return cls(fd, fd, owned=True)
        try:
            r, w = (int(x) for x in auth.split(","))
            if r < 0 or w < 0:
                return None
            os.fstat(r)
            os.fstat(w)
        except (ValueError, OSError):
            return None  # make did not pass the descriptors to us (recipe not marked +)
        return cls(r, w, owned=False)

    def _reader(self) -> None:
        while True:
            self._wanted.acquire()
            if self._closed:
                return
            try:
                token = os.read(self.rfd, 1)
            except OSError:
                return
            if not token:
                return
            with self._lock:
                if self._closed:
                    self._give(token)
                    return
            self._got.put(token)

    def request(self) -> None:
        """Ask for one more token; it shows up in :meth:`take` when make grants it."""
        self._wanted.release()

    def take(self) -> bool:
        """Take a granted token if there is one (non-blocking)."""
        try:
            token = self._got.get_nowait()
        except queue.Empty:
            return False
        self.held.append(token)
        return True

    def release(self) -> None:
        """Give one held token back to make."""
        if self.held:
            self._give(self.held.pop())

    def _give(self, token: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.wfd, token)

    def close(self) -> None:
        """Give back every token held or granted and stop asking for more."""
        with self._lock:
            self._closed = True
        while self.held:
            self.release()
        while True:
            try:
                self._give(self._got.get_nowait())
            except queue.Empty:
                break
        self._wanted.release()  # wake the reader so it can leave if it is idle
        if self.owned:
            with contextlib.suppress(OSError):
                os.close(self.rfd)
