"""A run forked by a warm worker, seen as the Popen of a ``TracedRun``.

The worker is the run's parent: it reports how the run ended, with what the run reported
at its end (``memotest/worker/child.py``). A run whose result is not what a fresh run's
would be (``tainted``) is run again by the runner as a fresh process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
from typing import TYPE_CHECKING, Any

from memotest.tracer import shim
from memotest.tracer.fold import Fold
from memotest.tracer.warm.reading import WarmReading, marked, read_report

if TYPE_CHECKING:
    from memotest.tracer.log import Event
    from memotest.tracer.warm.worker import Worker


def start_folded(
    worker: Worker, events: list[Event], own_reads: frozenset[tuple[int, str]]
) -> Fold:
    """``events`` (``worker``'s start-up, as a run forked from it has it) folded once for
    all its runs (``tracer/fold.py``), kept in ``worker.folded``."""
    done = worker.folded
    if done is None or done[0] is not events:
        fold = Fold([], 0, shim.shim_path())
        fold.feed(events, None, own_reads)
        done = worker.folded = (events, fold)
    return done[1]


class RemoteProcess:
    """A run forked by a worker, seen as the Popen of a :class:`TracedRun`: the worker
    is its parent and reports how it ended."""

    def __init__(self, worker: Worker, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        #: Why the run's end could not be observed (the worker died), if it could not.
        self.lost: str | None = None
        #: The worker's start-up, which comes before the run's own log in its trace.
        self.prior_events = worker.events
        #: Each path the worker's start-up observed, as the check before this fork found
        #: it (``Worker.changed``), and the worker's fingerprints of them, which its runs
        #: share (``recording/shared.py``).
        self.held = dict(worker.snapshot)
        self.shared = worker.shared
        #: The worker's pid and trace folder, for the run's process watcher.
        self.owner = (worker.run.pid, worker.run.dir)
        #: The files the worker read that its watchers vouch for (``vouched.py``):
        #: read by the run's own process, as far as the trace's ``read_elsewhere`` goes.
        self.own_reads = frozenset((worker.run.pid, path) for path in worker.vouched)
        #: The start-up folded once for the worker's runs (``tracer/fold.py``).
        self.folded = functools.partial(start_folded, worker, self.prior_events, self.own_reads)
        self.preloaded = worker.preloaded
        #: What the worker imported after its preparation but that the preparation had not
        #: marked: under the hooks, but not as one marked (``preload.py``).
        self.preloaded_unmarked = frozenset(
            n for n in worker.preloaded_prepared if not marked(n, worker.prepared_fresh)
        )
        self.config = worker.config
        #: What the run reported at its end: its ``args``, the ``modules`` it imported and
        #: the preloaded packages its ``sys.path`` would have found elsewhere
        #: (``shadowed``: ``preload.py``), the ``code`` it executed (``inputs/code.py``; or why
        #: its files stay whole), the ``listings`` and ``sections`` of its readers, and
        #: what plugins added (``reading.py``); None if nothing.
        self.report: dict[str, Any] | None = None
        self._reading: WarmReading | None = None
        self._done = threading.Event()

    def ended(self, status: int, report: dict[str, Any] | None = None) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        self.report = report
        self._done.set()

    @property
    def tainted(self) -> list[str]:
        """Modules the worker preloaded that the run had to import itself (plugins say
        which: ``WarmReading.fresh``), or that the run's ``sys.path`` would have found
        elsewhere (a module of the project by the same name): its result is not what a
        fresh run's would be."""
        report = self.report
        if not report:
            return []
        if self._reading is None:
            self._reading = read_report(report, self.config)
        fresh = self._reading.fresh
        preloaded = self.preloaded | self.preloaded_unmarked
        imported = sorted(n for n in preloaded if fresh and marked(n, fresh))
        return [*imported, *map(str, report.get("shadowed") or ())]

    @property
    def unfaithful(self) -> list[str]:
        """Why the run's result is not what a fresh run's would be: the modules of
        :attr:`tainted`, and what plugins said (``WarmReading.unfaithful``)."""
        names = self.tainted
        why = [f"the worker had preloaded {', '.join(names)}"] if names else []
        return [*why, *(self._reading.unfaithful if self._reading is not None else ())]

    def lose(self) -> None:
        """The worker is gone: the run (now re-parented to us) is ended and not trusted."""
        self.lost = "the warm worker ended during the run"
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        self.returncode = -signal.SIGKILL
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("warm run", timeout or 0)
        assert self.returncode is not None
        return self.returncode
