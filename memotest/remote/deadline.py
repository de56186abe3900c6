"""Deadlines for the remote: no request, and no phase of a build, waits longer than
``remote_timeout``, and the build's thread stays interruptible while it waits.

A per-read socket timeout does not bound a request: a server that sends one byte every
0.3 s, or trickles its headers, never trips it. So each request is registered with a
:class:`Watchdog` (one daemon thread per backend) under its deadline, the earlier of its
start plus ``remote_timeout`` and the end of the phase it belongs to (the fetch before the
build runs anything, the uploads at its end). When a request outlives its deadline the
watchdog *expires* the backend: it shuts down every socket the backend holds, so a thread
blocked in a read returns at once, and no request starts on it again. A request that ran
out of time is a :class:`~memotest.remote.backends.RemoteDown`, and the remote is not used
for the rest of the build (the circuit breaker of :mod:`memotest.remote.cache`).

The threads that talk to the remote are daemon threads (:func:`run_all`, and the uploads
of :class:`~memotest.remote.cache.RemoteCache`): the build's thread waits for them with a
timeout, in a wait that Ctrl-C and SIGTERM interrupt, and leaves behind any that did not
finish in time (a name lookup that hangs is not a socket the watchdog can shut), so that
neither the build nor the interpreter's exit waits for a remote.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: How long past a deadline the build's thread waits for the threads to notice it.
GRACE = 0.5


class Watchdog:
    """Calls ``expire`` once, in its own daemon thread, when a registered request outlives
    its deadline (``time.monotonic()`` seconds)."""

    def __init__(self, expire: Callable[[], None]) -> None:
        self._expire = expire
        self._cond = threading.Condition()
        self._live: dict[int, float] = {}
        self._count = 0
        self._thread: threading.Thread | None = None
        self._stopped = False
        #: Set when a request ran out of time: the backend is expired for good.
        self.expired = False

    def start(self, deadline: float) -> int:
        """Register a request that must end by ``deadline``; its token."""
        with self._cond:
            self._count += 1
            self._live[self._count] = deadline
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="memotest-remote-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
            return self._count

    def end(self, token: int) -> None:
        """The request of ``token`` ended (in time or not)."""
        with self._cond:
            self._live.pop(token, None)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._stopped:
                if not self._live:
                    self._cond.wait()
                    continue
                left = min(self._live.values()) - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self.expired = True
                break
            else:
                return
        self._expire()


def run_all(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    until: float | None,
    on_late: Callable[[], None],
) -> list[R | None]:
    """``fn`` of each item, in at most ``workers`` daemon threads; None for an item whose
    call did not end by ``until`` (+ :data:`GRACE`), after ``on_late()`` was called. An
    exception of ``fn`` is raised here; so is Ctrl-C, at once (the wait is interruptible;
    the threads are left behind)."""
    results: list[R | None] = [None] * len(items)
    errors: list[BaseException] = []
    todo = iter(range(len(items)))
    lock = threading.Lock()
    finished: queue.Queue[None] = queue.Queue()

    def work() -> None:
        try:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                try:
                    results[i] = fn(items[i])
                except BaseException as exc:  # raised in the build's thread
                    errors.append(exc)
                    return
        finally:
            finished.put(None)

    count = max(1, min(workers, len(items)))
    for _ in range(count):
        threading.Thread(target=work, name="memotest-remote", daemon=True).start()
    done = 0
    while done < count:
        left = None if until is None else until + GRACE - time.monotonic()
        if left is not None and left <= 0:
            on_late()
            break
        try:
            finished.get(timeout=left)
        except queue.Empty:
            continue
        done += 1
    if errors:
        raise errors[0]
    return list(results)  # a thread left behind may still write to its own
