"""``memotest build``: plan, run what is stale, record, report.

Every selected target is checked against the store in one batch (so a no-op build
validates each distinct path once). Then the loop, shaped like ninja's ``Builder::Build``:
targets whose predecessors have all finished are released (and checked again if one of
those ran: it may have rewritten what they read); the command runner settles each one
(replays a fresh one, or in a dry run reports it) or it becomes ready; the loop starts
what may start and reaps what finished. Every target goes through the same
:class:`~memotest.drive.step.Step` as a command memoized from another tool. Finished runs are
turned into records in this thread: SQLite is only touched here. A finished run's record
is taken of the file system at once (:meth:`~memotest.drive.step.Step.capture`), before
anything else starts, and finished (refined, mapped, stored:
:meth:`~memotest.drive.step.Step.complete`) once what may start has started, while it runs
(``tests/test_deferred_record.py``).

Where the rest lives: :mod:`memotest.loop.build_queue` (waiting, ready, done),
:mod:`memotest.loop.command_runner` (threads, ``-j``, ``exclusive``, make's jobserver; the dry
run), :mod:`memotest.loop.conflicts` (order edges, hazard re-runs), :mod:`memotest.loop.audit`.
"""

from __future__ import annotations

import fnmatch
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memotest.check.plan import Fresh, Stale
from memotest.drive.step import Pending, Step
from memotest.errors import UsageError
from memotest.load import plugins
from memotest.load.config import Project
from memotest.load.plugins import Config
from memotest.loop import schedule
from memotest.loop.audit import Audit
from memotest.loop.build_queue import BuildQueue
from memotest.loop.command_runner import CommandRunner, DryRunCommandRunner, RealCommandRunner
from memotest.loop.conflicts import Conflicts
from memotest.model import Target
from memotest.reporting.report import Summary, TargetResult
from memotest.run.observe import file_states
from memotest.run.runner import Runner
from memotest.store import Record, Store
from memotest.tracer.warm.pool import WorkerPool
from memotest.tracer.warm.spec import WarmSpec

if TYPE_CHECKING:
    from memotest.remote.cache import RemoteCache


@dataclass
class Options:
    jobs: int
    force: bool = False
    dry_run: bool = False
    no_cache: bool = False
    verbose: bool = False
    audit: float = 0.0  # fraction of would-be-cached targets to run again and compare
    audit_seed: int | None = None


def select(project: Project, names: Iterable[str]) -> list[Target]:
    """The named targets (exact names, ``foreach`` groups or globs) and everything they
    need, in targets-file order. No names: every target."""
    names = list(names)
    if not names and project.default is None:
        return list(project.targets.values())
    wanted: set[str] = set() if names else set(project.default or ())
    for name in names:
        hits = project.resolve(name) if project.resolve else None
        if hits is not None:
            if not hits:
                raise UsageError(f"no targets match {name!r} in {project.path}")
            wanted.update(hits)
            continue
        hits = [n for n in project.targets if n == name or n.split(":", 1)[0] == name]
        if not hits and any(c in name for c in "*?["):
            hits = [n for n in project.targets if fnmatch.fnmatchcase(n, name)]
        if not hits:
            raise UsageError(
                f"unknown target {name!r} in {project.path} (memotest list shows the targets)"
            )
        wanted.update(hits)
    stack = list(wanted)
    while stack:
        for need in project.targets[stack.pop()].needs:
            if need not in wanted:
                wanted.add(need)
                stack.append(need)
    return [t for n, t in project.targets.items() if n in wanted]


#: How long the build waits for the targets it just started to be launched before it
#: finishes the records of those that ended (it only orders the work; nothing depends on it).
LAUNCH_WAIT_S = 0.2


class Build:
    """One build of ``project``'s targets. ``store`` is None with ``--no-cache``; ``pool``:
    the warm workers to fork targets from (None: every target starts fresh)."""

    def __init__(
        self,
        project: Project,
        store: Store | None,
        options: Options,
        config: Config,
        pool: WorkerPool | None = None,
        remote: RemoteCache | None = None,
    ) -> None:
        self.store = None if options.no_cache else store
        self.config = config
        self.step = Step(
            root=project.root,
            settings=project.settings,
            states=file_states(project),
            runner=Runner(pool=pool),
            config=config,
            force=options.force,
        )
        self.runner: CommandRunner = (
            DryRunCommandRunner()
            if options.dry_run
            else RealCommandRunner(self.step, self.store, options.jobs)
        )
        #: The remote cache (none without a store, nor in a dry run).
        self.remote = remote if self.store is not None and not options.dry_run else None
        if self.remote is not None:
            self.step.uploader = self.remote.upload
        #: The targets file as every clone names it: the key of the shards' durations.
        self.targets_file = store.roots.portable(str(project.path)) if store else ""
        self.audit = Audit(0.0 if options.dry_run else options.audit, options.audit_seed)
        self.summary = Summary()
        self.started = 0.0
        self.verdicts: dict[str, Fresh | Stale] = {}
        #: The warm targets that have yet to start, by what their worker spec takes of
        #: them (:func:`_spec_key`; re-warms: ``WorkerPool.waiting``).
        self.waiting: Counter[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = Counter()
        #: The loader's records to finish once the first targets started (its collection:
        #: ``Project.deferred``), off the way to them.
        self.deferred = list(project.deferred)

    def run(self, targets: list[Target]) -> Summary:
        self.started = time.monotonic()
        plugins.call("memotest_build_start", targets=targets, config=self.config)
        serial = schedule.serial_order(targets)
        pool = getattr(self.step.runner, "pool", None)
        try:
            queue, conflicts = self.plan(targets, serial)
            self.waiting = Counter(_spec_key(t) for t in targets if t.warm and t.argv)
            if pool is not None:
                pool.expect(self._waiting)
            # Runs that finished, their records taken of the file system but not finished
            # (Step.capture): finished once what may start has started.
            pending: list[Pending] = []
            while queue or self.runner.busy or pending:
                released = queue.released()
                if released:
                    self.settle(released, queue)
                    continue
                launches = first = self.step.runner.launched
                while queue.ready and self.runner.can_start(queue.ready[0]):
                    target = queue.ready.pop(0)
                    self._started(target)
                    self.step.snapshot(target, queue.records.get(target.name))
                    self.step.choose(target, self.verdicts.get(target.name), self.store)
                    self.runner.start(target)
                    launches += 1
                if self.deferred and launches > first:
                    if isinstance(self.runner, RealCommandRunner):  # a dry run launches none
                        self.step.runner.wait_launched(launches, LAUNCH_WAIT_S)
                    self._finish_deferred()
                if pending:
                    # What just started starts first: its thread would share the GIL.
                    self.step.runner.wait_launched(launches, LAUNCH_WAIT_S)
                    for each in pending:
                        result = self.step.complete(each, self.store)
                        self.audit.compare(result, self.summary)
                        self.finish(result, queue, ran=True)
                    pending = []
                elif self.runner.busy:
                    names = self.runner.names()
                    plugins.call("memotest_target_running", config=self.config, names=names)
                    for target, outcome in self.runner.wait():
                        conflicts.note_run(target, outcome)
                        verdict = self.verdicts.get(target.name)
                        pending.append(self.step.capture(target, outcome, verdict, self.store))
                        queue.finish(target.name, outcome.status, ran=True)  # may release some
                elif queue.ready:  # pragma: no cover - defensive: nothing running, nothing fits
                    raise RuntimeError("scheduler stalled")
            self._finish_deferred()  # no target started
            conflicts.rerun_hazards(queue.by_name, self.summary)
            conflicts.recheck_replays(queue.by_name, self.summary)
        except KeyboardInterrupt:
            self.runner.abort()
            if self.remote is not None:
                self.remote.abort()  # waits for no upload
            raise
        finally:
            if pool is not None:
                pool.waiting = None
            self.runner.close()
            if self.remote is not None and not self.remote.aborted:
                from memotest.remote.durations import publish_durations

                ran = {r.name: r.duration for r in self.summary.results if r.status != "cached"}
                with self.remote.phase() as until:  # the upload phase: remote_timeout at most
                    publish_durations(self.remote, self.targets_file, ran)  # for --shard
                    self.remote.close(until)  # the uploads joined
                self.summary.remote = self.remote.summary()
        self.step.mark_used(self.store)
        self.summary.duration = time.monotonic() - self.started
        self.summary.results.sort(key=lambda r: serial.get(r.name, 0))
        return self.summary

    def _finish_deferred(self) -> None:
        """The loader's records finished (``Project.deferred``), into this build's store
        (one it does not hold the lock of, a dry run's, is none: each opens it)."""
        deferred, self.deferred = self.deferred, []
        store = self.store if self.store is not None and self.store.locked else None
        for finish in deferred:
            finish(store)

    def plan(self, targets: list[Target], serial: dict[str, int]) -> tuple[BuildQueue, Conflicts]:
        """Every target checked (``--audit`` turns some fresh ones stale), the order edges
        among those that may run, and the queue they wait in."""
        self.verdicts = self.step.check(targets, self.store)
        if self.remote is not None and self.store is not None:
            from memotest.remote.fetch import fetch  # with a remote only (http.client, ssl)

            self.verdicts.update(fetch(self.remote, self.step, self.store, targets, self.verdicts))
        self.audit.choose(self.verdicts, self.summary)
        records: dict[str, Record | None] = {n: v.record for n, v in self.verdicts.items()}
        conflicts = Conflicts(self.step, self.store, serial)
        edges = conflicts.order_edges(self.verdicts, records, self.runner.runs)
        return BuildQueue(targets, edges, records, serial), conflicts

    def settle(self, released: list[Target], queue: BuildQueue) -> None:
        """Targets whose predecessors all finished: skipped (a need did not pass), checked
        again (a predecessor ran), then settled by the command runner or made ready."""
        recheck = []
        for t in released:
            unmet = queue.unmet_need(t)
            if unmet is not None:
                self.finish(TargetResult(t.name, "skipped", 0.0, reason=unmet), queue)
            elif queue.after_a_run(t):
                recheck.append(t)
        if recheck:
            self.verdicts.update(self.step.check(recheck, self.store))
        ready = []
        for t in released:
            if t.name in queue.done:
                continue
            result = self.runner.settle(t, self.verdicts[t.name])
            if result is None:
                ready.append(t)
            else:
                self.finish(result, queue)
        queue.push(ready)

    def _waiting(self, spec: WarmSpec) -> int:
        """How many targets that could fork from a worker of ``spec`` have yet to start
        (called from the runs' threads: one read of a dict only the build's thread
        writes)."""
        return self.waiting.get((spec.cwd, spec.python, spec.modules, spec.prepare), 0)

    def _started(self, target: Target) -> None:
        """``target`` starts (or will not run): one less waiting (:meth:`_waiting`)."""
        if target.warm and target.argv:
            key = _spec_key(target)
            self.waiting[key] = self.waiting.get(key, 0) - 1

    def finish(self, result: TargetResult, queue: BuildQueue, ran: bool = False) -> None:
        if not ran:
            self._started(queue.by_name[result.name])
        queue.finish(result.name, result.status, ran)
        self.summary.results.append(result)
        failed = result.status in ("failed", "timeout", "error")
        if failed and self.summary.first_failure is None:
            self.summary.first_failure = time.monotonic() - self.started
        target = queue.by_name[result.name]
        self.step.report(target, result)


def _spec_key(target: Target) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """What a warm target's worker spec (``WarmSpec.of``) takes of the target, but the
    environment: targets of one spec share it (an upper bound of those that do)."""
    return (target.cwd, target.argv[0], tuple(target.warm), tuple(target.prepare))


def interrupt_on_sigterm() -> Callable[[], None]:
    """Treat SIGTERM like Ctrl-C for the duration of a build; returns the undo."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)
