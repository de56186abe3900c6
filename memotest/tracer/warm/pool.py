"""The warm workers of a build: one per spec, started on first use, replaced when stale.

What the runs report teaches the next workers what to preload (``preload.py``); a worker
that refuses a module to preload is started again without it, and workers that keep being
replaced stop preloading.

**Re-warming.** The book is learned from runs, so the first build of a project (every
target stale: a full run) would start its worker with nothing to preload, and every run
would import the test runner's plugins' libraries and the tests' own again. Within a
build, once the runs taught the book enough that the worker does not preload
(``REWARM_MIN`` modules), a new worker with that preload is started in the background
while the old one keeps forking; the runs that start after it is ready fork from it, and
the old one is retired (its runs go on). That is the same worker, with the same checks
and the same inputs in every record, as the next build would start: nothing a run
observes is dropped, only paid for once. At most ``REWARMS`` times per spec and build
(the collection's imports, then the first targets'), and never for a spec whose worker
already left modules out in this build (its preload is settled until the next build).

**Promotion.** A build that collects its targets first (``--pytest``) forks the collection
from a worker of the targets' spec without their preparation (``WarmSpec.prepare``). When
the first target of a prepared spec asks for its worker and no target of that plain spec
is left, the plain worker, its runs all ended, is made the prepared one (``promote.py``):
one Python start and one import of the test runner fewer per build that collects.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from memotest._executed import extension_path
from memotest.load.plugins import Config
from memotest.tracer.warm.preload import PreloadBook
from memotest.tracer.warm.promote import promote
from memotest.tracer.warm.remote import RemoteProcess
from memotest.tracer.warm.spec import WarmSpec
from memotest.tracer.warm.worker import CHANGED_WHILE_STARTING, WARMUP_TIMEOUT, Worker

#: How many modules the book must know that the current worker did not preload for a
#: re-warm (see the module doc), and how many re-warms a spec gets per build.
REWARM_MIN = 10
REWARMS = 2
#: How many targets that could fork from a re-warmed worker must have yet to start.
REWARM_RUNS_LEFT = 2


class WorkerPool:
    """One worker per spec, shared by every job slot and started on first use. A worker
    whose inputs changed is replaced; the old one is stopped when the pool closes (runs
    of it may still be going on). What the runs report teaches the next workers what to
    preload (``preload.py``); :meth:`close` saves it."""

    #: How many times a worker is started again without the modules it refused to
    #: preload (then once more, preloading nothing).
    REFUSALS = 2
    #: After this many replacements in one build (the runs keep changing a file the
    #: worker read), new workers of that spec preload nothing.
    REPLACEMENTS = 2

    def __init__(self, work_root: str | None = None, *, config: Config | None = None) -> None:
        self.work_root = work_root
        #: The command's configuration, for the hooks (a blank one without a command line).
        self.config = config if config is not None else Config()
        self.book = PreloadBook(config)
        #: Whether workers preload what earlier runs imported (off: their own modules).
        self.preload = True
        #: Whether runs report the code they executed (``inputs/code.py``; off: files whole).
        self.code_level = True
        self._workers: dict[WarmSpec, Worker] = {}
        self._retired: list[Worker] = []
        self._starts: dict[WarmSpec, int] = {}
        self._replaced: dict[WarmSpec, int] = {}
        self._starting: dict[WarmSpec, threading.Lock] = {}
        self._lock = threading.Lock()
        #: Why a worker was not used or was replaced, with how many times (``build -v``).
        self.events: dict[str, int] = {}
        #: Re-warms started per spec, and the threads starting them (module doc).
        self._rewarms: dict[WarmSpec, int] = {}
        self._rewarming: list[threading.Thread] = []
        self._closed = False
        #: How many of the build's targets that could fork from a worker of a spec have
        #: yet to start (at least as many as will); None: unknown.
        self.waiting: Callable[[WarmSpec], int] | None = None
        #: The specs whose runs taught the book before the build said what is left
        #: (:meth:`defer`); None: not deferring.
        self._deferred: set[WarmSpec] | None = None

    def worker(self, spec: WarmSpec) -> Worker | None:
        """The worker for ``spec``, started if needed; None if none can be."""
        with self._lock:
            starting = self._starting.setdefault(spec, threading.Lock())
        with starting:  # one thread starts it, the others wait for it
            with self._lock:
                current = self._workers.get(spec)
                if current is not None and current.usable:
                    return current
                if current is not None:
                    del self._workers[spec]
                    self._retired.append(current)
                    self._note(f"a warm worker was replaced: {current.why}")
                    self._replaced[spec] = self._replaced.get(spec, 0) + 1
                    if self._replaced[spec] == self.REPLACEMENTS:
                        self._note("warm workers replaced too often: no more preloading")
                if self._starts.get(spec, 0) < 0:
                    return None
            promoted = self._promote(spec)
            if promoted is not None:
                with self._lock:
                    self._workers[spec] = promoted
                return promoted
            for attempt in range(self.REFUSALS + 1):
                # The last attempt preloads nothing: refusals never cost the worker.
                preload = self.preload_for(spec) if attempt < self.REFUSALS else ()
                if self.code_level and extension_path() is None:
                    self.note("Python files are whole: memotest/_executed is not built")
                whole = self.book.whole_for(spec.cwd, spec.python)
                after = self.prepared_for(spec) if attempt < self.REFUSALS else ()
                worker = Worker(
                    spec, self.work_root, preload, self.code_level, whole, self.config, after
                )
                ok = worker.start()
                if ok or not worker.refused:
                    break
                self.book.refuse(spec.cwd, spec.python, [name for name, _ in worker.refused])
                for name, why in worker.refused:
                    self.note(f"a warm worker left out {name} ({why})")
                worker.close()
                with self._lock:
                    self._rewarms[spec] = REWARMS  # its preload is settled for this build
            with self._lock:
                if ok:
                    self._workers[spec] = worker
                    return worker
                # Once more if a file changed meanwhile; an import error would fail again.
                again = worker.why == CHANGED_WHILE_STARTING and self._starts.get(spec, 0) == 0
                self._starts[spec] = 1 if again else -1
                self._note(
                    f"a warm worker could not be used ({worker.why})"
                    + ("" if again else f"; runs in {spec.cwd} started fresh")
                )
            worker.close()
            return None

    def _promote(self, spec: WarmSpec) -> Worker | None:
        """The worker of ``spec``'s runs without their preparation, made the worker of
        ``spec`` (``promote.py``), when every run it forked has ended and no target
        of the build that could fork from it is left to start (module doc); else None."""
        if not spec.prepare or self.waiting is None or self._starts.get(spec, 0) != 0:
            return None
        plain = dataclasses.replace(spec, prepare=())
        if self.waiting(plain) > 0:
            return None
        with self._lock:
            current = self._workers.get(plain)
            if current is None or not current.idle():
                return None
            del self._workers[plain]  # this thread's now
        whole = self.book.whole_for(spec.cwd, spec.python)
        preload, after = self.preload_for(spec), self.prepared_for(spec)
        if promote(current, spec, preload, after, whole, WARMUP_TIMEOUT):
            self.note("a warm worker whose runs ended was prepared for others")
            return current
        if current.refused:
            self.book.refuse(spec.cwd, spec.python, [name for name, _ in current.refused])
        self.note(f"a warm worker could not be prepared for others ({current.why})")
        with self._lock:
            self._retired.append(current)
        return None

    def start_early(self, spec: WarmSpec) -> None:
        """Starts the worker of ``spec`` in the background, before a run asks for it (a
        loader that knows its targets' worker before their list: ``--pytest``). A run
        takes it as one started on its request (:meth:`worker`); :meth:`close` waits."""
        with self._lock:
            if self._closed or spec in self._workers or spec in self._starting:
                return
            thread = threading.Thread(target=self.worker, args=(spec,), name="memotest-early")
            self._rewarming.append(thread)
            self._note("a warm worker was started before its runs were listed")
        thread.start()

    def preload_for(self, spec: WarmSpec) -> tuple[str, ...]:
        """What a new worker for ``spec`` preloads (nothing with preloading off)."""
        if not self.preload or self._replaced.get(spec, 0) >= self.REPLACEMENTS:
            return ()
        return self.book.modules_for(spec.cwd, spec.python, spec.modules)

    def prepared_for(self, spec: WarmSpec) -> tuple[str, ...]:
        """What a new worker for ``spec`` imports after its plugin prepared the runs
        (nothing with preloading off or without a preparation)."""
        if not spec.prepare or not self.preload:
            return ()
        if self._replaced.get(spec, 0) >= self.REPLACEMENTS:
            return ()
        return self.book.prepared_for(spec.cwd, spec.python, spec.modules)

    def learn(self, spec: WarmSpec, run: RemoteProcess) -> None:
        """Takes what a forked run reported for the next workers of its spec, and starts a
        re-warm when the current worker would preload too little of it (module doc)."""
        if run.report is None:
            return
        self.book.learn(spec.cwd, spec.python, run.report)
        with self._lock:
            if self.waiting is None and self._deferred is not None:
                self._deferred.add(spec)  # decided once the build says what is left
                return
        self._consider(spec)

    def defer(self) -> None:
        """A build will say how many targets are left (:meth:`expect`): until then, what
        the runs teach (the collection's) starts no re-warm."""
        with self._lock:
            self._deferred = set()

    def expect(self, waiting: Callable[[WarmSpec], int] | None) -> None:
        """The build's targets that have yet to start (:attr:`waiting`); the re-warms
        deferred until now are decided."""
        with self._lock:
            self.waiting = waiting
            deferred, self._deferred = self._deferred or set(), None
        for spec in deferred:
            self._consider(spec)

    def _consider(self, spec: WarmSpec) -> None:
        """Starts a re-warm of ``spec``'s worker if it would preload too little of what
        the book knows and enough targets are left (module doc)."""
        waiting = self.waiting
        if waiting is not None and waiting(spec) < REWARM_RUNS_LEFT:
            return
        with self._lock:
            current = self._workers.get(spec)
            if (
                self._closed
                or current is None
                or not current.usable
                or self._rewarms.get(spec, 0) >= REWARMS
            ):
                return
        preload, after = self.preload_for(spec), self.prepared_for(spec)
        had = current.preloaded | set(current.preload)
        had |= current.preloaded_prepared | set(current.prepared_preload)
        if len([m for m in (*preload, *after) if m not in had]) < REWARM_MIN:
            return
        with self._lock:
            if self._closed or self._rewarms.get(spec, 0) >= REWARMS:
                return
            self._rewarms[spec] = self._rewarms.get(spec, 0) + 1
            self._note("a warm worker's re-warm started")
            thread = threading.Thread(
                target=self._rewarm, args=(spec, current, preload, after), name="memotest-rewarm"
            )
            self._rewarming.append(thread)
        thread.start()

    def _rewarm(
        self, spec: WarmSpec, old: Worker, preload: tuple[str, ...], after: tuple[str, ...]
    ) -> None:
        """Starts a worker for ``spec`` that preloads ``preload``; it replaces ``old`` if
        that is still the current one and usable. One that refuses a module teaches the
        book and is dropped (the next build's worker leaves the module out)."""
        whole = self.book.whole_for(spec.cwd, spec.python)
        worker = Worker(spec, self.work_root, preload, self.code_level, whole, self.config, after)
        ok = worker.start()
        if not ok and worker.refused:
            self.book.refuse(spec.cwd, spec.python, [name for name, _ in worker.refused])
        with self._lock:
            if ok and not self._closed and self._workers.get(spec) is old and old.usable:
                self._workers[spec] = worker
                self._retired.append(old)
                self._note("a warm worker was re-warmed with what the runs imported")
                return
        worker.close()

    def note(self, event: str) -> None:
        """Counts an event (``build -v``)."""
        with self._lock:
            self._note(event)

    def noted(self) -> dict[str, int]:
        """A copy of the events counted so far: threads may count more meanwhile."""
        with self._lock:
            return dict(self.events)

    def _note(self, event: str) -> None:
        """Counts an event; the caller holds ``_lock``."""
        self.events[event] = self.events.get(event, 0) + 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            starting = list(self._rewarming)
        for thread in starting:
            thread.join()
        with self._lock:
            workers = [*self._workers.values(), *self._retired]
            self._workers.clear()
            self._retired.clear()
        for w in workers:
            w.close()
        self.book.save()
