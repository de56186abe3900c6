"""``memotest build``: plan, run what is stale, record, report.

The loop: a target becomes *ready* when all its needs have finished. Ready targets are
checked against the store in one batch (so a no-op build validates each distinct path
once); fresh ones replay their result, stale ones are started as slots free up (at most
``jobs`` at once, an ``exclusive`` one alone). A target is checked only once its needs
have finished because a need that ran may have rewritten what it reads. Finished runs are
turned into records in this thread: SQLite is only touched here.
"""

from __future__ import annotations

import concurrent.futures as cf
import fnmatch
import math
import os
import random
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memotest import keys as keymod
from memotest import plugins, schedule
from memotest.config import Project
from memotest.errors import UsageError
from memotest.jobserver import Jobserver
from memotest.model import Outcome, Target, Trace
from memotest.observe import Ignore, file_states
from memotest.plan import Fresh, Stale, plan
from memotest.plugins import Config
from memotest.record import make_record
from memotest.report import Summary, TargetResult
from memotest.rewritten import Before, snapshot
from memotest.runner import Runner
from memotest.store import STORE_DIR, Record, Store

FLAKY_ATTEMPTS = 3


@dataclass
class Options:
    jobs: int
    force: bool = False
    dry_run: bool = False
    no_cache: bool = False
    verbose: bool = False
    audit: float = 0.0  # fraction of would-be-cached targets to run again and compare
    audit_seed: int | None = None
    warm: bool = True  # fork warm-capable targets from warm workers (tracer/warm.py)


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


class Build:
    def __init__(
        self, project: Project, store: Store | None, options: Options, config: Config
    ) -> None:
        self.project = project
        self.store = store
        self.options = options
        self.config = config
        self.settings = project.settings
        self.states = file_states(project)
        self.env = keymod.env_key(self.settings)  # the same for every target
        self.runner = Runner(warm=options.warm)
        self.store_dir = str(project.root / STORE_DIR)
        self.ignore = Ignore(self.settings.ignore, str(project.root), [self.store_dir])
        #: Per target about to run: the files its last run rewrote, as they were before.
        self.before: dict[str, dict[str, Before]] = {}

    # -- the loop ------------------------------------------------------------------------

    def run(self, targets: list[Target]) -> Summary:
        summary = Summary()
        self.t0 = started = time.monotonic()
        plugins.call("memotest_build_start", targets=targets, config=self.config)
        by_name = {t.name: t for t in targets}
        serial = schedule.serial_order(targets)
        initial = self.check(targets)
        audited = self.choose_audit(initial, summary)
        for name in audited:
            rec = initial[name].record  # type: ignore[union-attr]
            initial[name] = Stale("forced", "audit: re-run to compare with the cache", record=rec)
        edges, records = self.edges(targets, initial, serial)
        preds: dict[str, set[str]] = {t.name: set(t.needs) & by_name.keys() for t in targets}
        for e in edges:
            preds[e.after].add(e.before)
        durations = {n: (r.duration if r else None) for n, r in records.items()}
        prio = schedule.priorities(by_name, edges, durations)

        def urgency(t: Target) -> tuple[int, float, int]:
            rec = records.get(t.name)
            known = rec is not None and rec.status == "passed"
            return (1 if known else 0, -prio.get(t.name, 0.0), serial[t.name])

        waiting = set(by_name)
        ready: list[Target] = []
        done: dict[str, str] = {}
        ran: set[str] = set()
        running: dict[cf.Future[Outcome], Target] = {}
        verdicts: dict[str, Fresh | Stale] = dict(initial)
        finished_runs: list[schedule.Run] = []

        def finish(result: TargetResult) -> None:
            done[result.name] = result.status
            summary.results.append(result)
            if result.status in ("failed", "timeout", "error") and summary.first_failure is None:
                summary.first_failure = time.monotonic() - started
            plugins.call("memotest_after_target", target=by_name[result.name], result=result)

        jobserver = Jobserver.from_environ() if self.options.jobs > 1 else None
        asked = 0  # tokens requested and not yet granted
        pool = cf.ThreadPoolExecutor(max_workers=self.options.jobs)
        try:
            while waiting or ready or running:
                # Targets whose predecessors all finished are checked (again, if one of
                # them ran: it may have rewritten what they read) and then replayed,
                # skipped or made ready.
                newly = [
                    by_name[n] for n in sorted(waiting, key=serial.get) if preds[n] <= done.keys()
                ]
                recheck = []
                for t in newly:
                    waiting.discard(t.name)
                    bad = [n for n in t.needs if done.get(n) not in ("passed", "cached")]
                    if bad:
                        why = f"needs {bad[0]}, which {done[bad[0]]}"
                        finish(TargetResult(t.name, "skipped", 0.0, reason=why))
                    elif preds[t.name] & ran:
                        recheck.append(t)
                if recheck:
                    verdicts.update(self.check(recheck))
                for t in newly:
                    if t.name in done:
                        continue
                    v = verdicts[t.name]
                    if self.options.dry_run:
                        finish(self.dry_result(t, v))
                    elif isinstance(v, Fresh):
                        finish(self.replay(t, v.record))
                    else:
                        ready.append(t)
                if newly:
                    ready.sort(key=urgency)
                    continue
                # Start what fits: the first runs free, each further one needs a token
                # when make's jobserver is in charge.
                while ready and len(running) < self.options.jobs:
                    t = ready[0]
                    if running and (
                        "exclusive" in t.tags
                        or any("exclusive" in r.tags for r in running.values())
                    ):
                        break
                    if running and jobserver is not None:
                        if not jobserver.take():
                            if asked == 0:
                                jobserver.request()
                                asked = 1
                            break
                        asked = 0
                    ready.pop(0)
                    self.before[t.name] = snapshot(records.get(t.name), self.states)
                    running[pool.submit(self.execute, t)] = t
                if running:
                    plugins.call(
                        "memotest_target_running", names=[t.name for t in running.values()]
                    )
                    timeout = 0.05 if asked else None
                    finished, _ = cf.wait(
                        list(running), timeout=timeout, return_when=cf.FIRST_COMPLETED
                    )
                    for fut in finished:
                        t = running.pop(fut)
                        if jobserver is not None and running:
                            jobserver.release()
                        outcome = fut.result()
                        ran.add(t.name)
                        result, run = self.record(t, outcome, verdicts.get(t.name))
                        if run is not None:
                            finished_runs.append(run)
                        if t.name in audited:
                            self.compare_audit(result, audited[t.name], summary)
                        finish(result)
                elif ready:  # pragma: no cover - defensive: nothing running, nothing fits
                    raise RuntimeError("scheduler stalled")
            self.rerun_hazards(finished_runs, serial, by_name, summary)
        except KeyboardInterrupt:
            self.runner.kill_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            if jobserver is not None:
                jobserver.close()
            pool.shutdown(wait=True)
        summary.duration = time.monotonic() - started
        summary.results.sort(key=lambda r: serial.get(r.name, 0))
        return summary

    # -- auditing the cache ----------------------------------------------------------------

    def choose_audit(
        self, verdicts: dict[str, Fresh | Stale], summary: Summary
    ) -> dict[str, Record]:
        """With ``--audit F``: a random F of the targets that would be replayed, to be run
        again and compared with the cached result (the seed is printed to reproduce)."""
        if self.options.audit <= 0 or self.options.dry_run:
            return {}
        fresh = sorted(n for n, v in verdicts.items() if isinstance(v, Fresh))
        seed = self.options.audit_seed
        if seed is None:
            seed = random.SystemRandom().randrange(1 << 31)
        k = min(len(fresh), math.ceil(self.options.audit * len(fresh)))
        chosen = random.Random(seed).sample(fresh, k)
        summary.audit = {"seed": seed, "audited": sorted(chosen), "errors": []}
        return {n: verdicts[n].record for n in chosen}  # type: ignore[union-attr]

    def compare_audit(self, result: TargetResult, cached: Record, summary: Summary) -> None:
        if (result.status, result.exit_code) == (cached.status, cached.exit_code):
            result.reason = "audit: re-ran, same result as the cache"
            return
        error = (
            f"{result.name} was cached as {cached.status} (exit code {cached.exit_code}) "
            f"but {result.status} (exit code {result.exit_code}) when re-run"
        )
        result.reason = f"memoization error: {error}"
        summary.audit["errors"].append(error)

    # -- scheduling ----------------------------------------------------------------------

    def edges(
        self, targets: list[Target], verdicts: dict[str, Fresh | Stale], serial: dict[str, int]
    ) -> tuple[list[schedule.Edge], dict[str, Record | None]]:
        """The order edges between the targets that may run in this build, and every
        target's last record. A target may run if it is stale, or if a target that may run
        wrote something it observed last time (it is checked again after that one)."""
        records: dict[str, Record | None] = {
            n: (v.record if isinstance(v, Fresh) else getattr(v, "record", None))
            for n, v in verdicts.items()
        }
        maybe = {n for n, v in verdicts.items() if isinstance(v, Stale)}
        if not maybe or self.store is None or self.options.dry_run:
            return [], records
        frontier = set(maybe)
        while frontier:
            written: set[str] = set()
            for n in frontier:
                rec = records.get(n)
                if rec is not None:
                    written.update(rec.writes)
                    written.update(os.path.dirname(w) for w in rec.writes)
            ids = self.store.fp_ids_of_paths(written)
            frontier = set()
            if ids:
                for n, rec in records.items():
                    if n in maybe or rec is None:
                        continue
                    if not ids.isdisjoint(getattr(rec.inputs, "ids", ())):
                        frontier.add(n)
            maybe |= frontier
        footprints = {}
        for n in maybe:
            rec = records.get(n)
            if rec is not None:
                footprints[n] = schedule.Footprint.of(
                    ((i.path, i.kind) for i in rec.inputs), rec.writes
                )
        edges = schedule.conflict_edges(footprints, serial)
        learned = self.store.get_meta(schedule.LEARNED_KEY)
        edges += schedule.learned_edges(learned, maybe, serial)
        return edges, records

    def rerun_hazards(
        self,
        runs: list[schedule.Run],
        serial: dict[str, int],
        by_name: dict[str, Target],
        summary: Summary,
    ) -> None:
        """Finds hazards among the runs of this build; their targets run again, one at a
        time in serial order, and the edges are remembered for the next builds."""
        found = schedule.hazards(runs, serial)
        if not found or self.options.no_cache:
            return
        summary.hazards.extend(found)
        names = sorted({n for e in found for n in (e.before, e.after)}, key=serial.get)
        if self.store is not None:
            learned = self.store.get_meta(schedule.LEARNED_KEY) or []
            known = {tuple(x[:2]) for x in learned}
            learned += [
                [e.before, e.after, e.path] for e in found if (e.before, e.after) not in known
            ]
            self.store.set_meta(schedule.LEARNED_KEY, learned)
        plugins.call(
            "memotest_build_start", targets=[by_name[n] for n in names], config=self.config
        )
        for n in names:
            edge = next(e for e in found if n in (e.before, e.after))
            other = edge.after if n == edge.before else edge.before
            t = by_name[n]
            last = self.store.records([n]).get(n) if self.store is not None else None
            self.before[n] = snapshot(last, self.states)
            result, _ = self.record(t, self.execute(t), None)
            result.reason = f"re-run alone: ran alongside {other}, conflict on {edge.path}"
            summary.results = [r for r in summary.results if r.name != n]
            summary.results.append(result)
            plugins.call("memotest_after_target", target=t, result=result)

    def check(self, targets: list[Target]) -> dict[str, Fresh | Stale]:
        if self.store is None or self.options.no_cache:
            return {t.name: Stale("forced", "--no-cache") for t in targets}
        tkeys = {t.name: keymod.target_key(t, self.settings, env=self.env) for t in targets}
        return plan(targets, tkeys, self.store, self.states, force=self.options.force)

    # -- one target ------------------------------------------------------------------------

    def execute(self, target: Target) -> Outcome:
        """Runs in a worker thread: the target, retried if flaky."""
        env = keymod.run_environ(target, self.settings)
        plugins.call("memotest_before_target", target=target, env=env)
        attempts = FLAKY_ATTEMPTS if "flaky" in target.tags else 1
        outcome = self.runner.run(target, env)
        n = 1
        while outcome.status in ("failed", "timeout") and n < attempts:
            if self.runner.interrupted.is_set():
                break
            n += 1
            outcome = self.runner.run(target, env)
        outcome.attempts = n
        return outcome

    def replay(self, target: Target, record: Record) -> TargetResult:
        assert self.store is not None
        self.store.restore_outputs(record.outputs, target.cwd)
        log = self.store.read_blob(record.log_digest) if record.log_digest else b""
        return TargetResult(target.name, "cached", record.duration, record.exit_code, log=log)

    def dry_result(self, target: Target, verdict: Fresh | Stale) -> TargetResult:
        if isinstance(verdict, Fresh):
            return TargetResult(
                target.name, "cached", verdict.record.duration, verdict.record.exit_code
            )
        return TargetResult(target.name, "skipped", 0.0, reason=f"would run: {verdict.reason}")

    def record(
        self, target: Target, outcome: Outcome, verdict: Fresh | Stale | None
    ) -> tuple[TargetResult, schedule.Run | None]:
        """Stores the outcome of a run (unless --no-cache); returns its result line and
        what it read and wrote, for the hazard check."""
        reason = verdict.reason if isinstance(verdict, Stale) else None
        before = self.before.pop(target.name, None)
        result = TargetResult(
            target.name,
            outcome.status,
            outcome.duration,
            outcome.exit_code,
            reason=outcome.error or reason,
            log=outcome.log,
            flaky=outcome.attempts > 1 and outcome.status == "passed",
        )
        if outcome.trace is None or self.runner.interrupted.is_set():
            return result, None
        trace = outcome.trace
        # What the target wrote is no longer what this build's snapshot says.
        self.states.forget(trace.writes | trace.deleted)
        run = schedule.Run(
            target.name, outcome.started, outcome.finished, self.footprint(trace, outcome)
        )
        if self.store is None or self.options.no_cache:
            return result, run
        rec = make_record(
            target,
            outcome,
            key=keymod.target_key(target, self.settings, env=self.env),
            states=self.states,
            store=self.store,
            ignore=self.ignore,
            root=self.project.root,
            before=before,
        )
        self.store.put(rec)
        if not rec.cacheable and outcome.status == "passed":
            result.note = f"not cached: {rec.uncacheable_reason}"
        return result, run

    def footprint(self, trace: Trace, outcome: Outcome) -> schedule.Footprint:
        skip = self.ignore.also(self.store_dir, outcome.workdir)
        written = {p for p in trace.writes | trace.deleted if not skip(p)}
        reads = trace.reads | trace.stats | trace.missing | trace.execs | trace.loaded
        return schedule.Footprint(
            reads={p for p in reads - written if not skip(p)},
            listed={p for p in trace.listed if not skip(p)},
            writes=written,
            entry_dirs={
                os.path.dirname(p)
                for p in (trace.created or trace.writes) | trace.deleted
                if not skip(p)
            },
        )


def interrupt_on_sigterm() -> Callable[[], None]:
    """Treat SIGTERM like Ctrl-C for the duration of a build; returns the undo."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)
