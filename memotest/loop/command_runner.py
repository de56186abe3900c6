"""What the build loop hands its targets to: runs them, or, in a dry run, says it would.

As in ninja's ``Builder::Build``, the loop (:meth:`memotest.loop.build.Build.run`) starts what
may start and reaps what finished, through a command runner:

* :class:`RealCommandRunner` replays a fresh target and runs a stale one in a thread of
  its own (at most ``jobs`` at once; an ``exclusive`` target alone; under ``make -j``,
  each run beyond the first holds a token of make's jobserver);
* :class:`DryRunCommandRunner` (``build --dry-run``, ninja's ``DryRunCommandRunner``)
  touches nothing: a fresh target is reported cached, a stale one as skipped with the
  reason it would run, and nothing ever starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memotest.check.plan import Fresh, Stale
from memotest.drive import faults
from memotest.drive.step import Step
from memotest.lazy import lazy_module
from memotest.loop.jobserver import Jobserver
from memotest.model import Outcome, Target
from memotest.reporting.report import TargetResult
from memotest.store import Store

if TYPE_CHECKING:
    import concurrent.futures as cf
else:
    cf = lazy_module("concurrent.futures")  # imported when a target runs (logging, queue...)

#: How often the loop looks for a jobserver token it asked for while runs go on.
TOKEN_POLL_S = 0.05


class RealCommandRunner:
    """Runs targets through ``step``, up to ``jobs`` at once."""

    runs = True

    def __init__(self, step: Step, store: Store | None, jobs: int) -> None:
        self.step = step
        self.store = store
        self.jobs = jobs
        self.running: dict[cf.Future[Outcome], Target] = {}
        self.jobserver = Jobserver.from_environ() if jobs > 1 else None
        self.asked = False  # a token was requested and not yet granted
        self._pool: cf.ThreadPoolExecutor | None = None  # made by the first run

    @property
    def pool(self) -> cf.ThreadPoolExecutor:
        """The threads the runs go in, made when the first one starts (a no-op build
        starts none, and imports no ``concurrent.futures``)."""
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(max_workers=self.jobs)
        return self._pool

    def settle(self, target: Target, verdict: Fresh | Stale) -> TargetResult | None:
        """A checked target's result if it needs no run (fresh: replayed), else None."""
        if isinstance(verdict, Fresh):
            assert self.store is not None
            return self.step.replay(target, verdict.record, self.store)
        return None

    def can_start(self, target: Target) -> bool:
        """Whether ``target`` may start now: a free slot, nothing exclusive about, and
        when make's jobserver is in charge, a token for every run beyond the first."""
        if len(self.running) >= self.jobs:
            return False
        if not self.running:
            return True
        if "exclusive" in target.tags or any("exclusive" in r.tags for r in self.running.values()):
            return False
        if self.jobserver is not None:
            if not self.jobserver.take():
                if not self.asked:
                    self.jobserver.request()
                    self.asked = True
                return False
            self.asked = False
        return True

    def start(self, target: Target) -> None:
        self.running[self.pool.submit(self.step.run, target)] = target

    @property
    def busy(self) -> bool:
        return bool(self.running)

    def names(self) -> list[str]:
        """The running targets."""
        return [t.name for t in self.running.values()]

    def wait(self) -> list[tuple[Target, Outcome]]:
        """The runs that finished, once one has (or, while a token is asked for, after a
        short while, so that the loop can look for it)."""
        timeout = TOKEN_POLL_S if self.asked else None
        finished, _ = cf.wait(list(self.running), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        reaped = []
        for fut in finished:
            target = self.running.pop(fut)
            if self.jobserver is not None and self.running:
                self.jobserver.release()
            exc = fut.exception()
            if isinstance(exc, Exception):  # memotest failed to start it: the others go on
                reaped.append((target, self._unstarted(target, exc)))
            else:
                reaped.append((target, fut.result()))
        return reaped

    def _unstarted(self, target: Target, exc: Exception) -> Outcome:
        """The outcome of a target memotest failed to start (:mod:`memotest.drive.faults`; once
        the command started, the runner keeps its result whatever fails)."""
        where = faults.log(self.step.root, f"running {target.name}", exc)
        tail = f" (traceback in {where})" if where else ""
        error = f"memotest could not run it: {faults.one_line(exc)}{tail}"
        return Outcome(
            target=target, status="error", exit_code=None, duration=0.0, log=b"", error=error
        )

    def abort(self) -> None:
        """Ctrl-C: ends every running target's whole process tree."""
        self.step.runner.kill_all()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Gives make its tokens back; waits for the threads."""
        if self.jobserver is not None:
            self.jobserver.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class DryRunCommandRunner:
    """Says what would run and why; runs, replays and writes nothing."""

    runs = False
    busy = False

    def settle(self, target: Target, verdict: Fresh | Stale) -> TargetResult:
        if isinstance(verdict, Fresh):
            rec = verdict.record
            return TargetResult(target.name, "cached", rec.duration, rec.exit_code)
        return TargetResult(target.name, "skipped", 0.0, reason=f"would run: {verdict.reason}")

    def can_start(self, target: Target) -> bool:
        return False  # settle() leaves nothing to start

    def start(self, target: Target) -> None:  # pragma: no cover - can_start() says no
        raise AssertionError("a dry run starts nothing")

    def names(self) -> list[str]:
        return []

    def wait(self) -> list[tuple[Target, Outcome]]:
        return []

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


CommandRunner = RealCommandRunner | DryRunCommandRunner
