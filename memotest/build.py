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
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memotest import keys as keymod
from memotest import plugins
from memotest.config import Project
from memotest.errors import UsageError
from memotest.fingerprint import FileStates
from memotest.model import Target
from memotest.plan import Fresh, Stale, plan
from memotest.plugins import Config
from memotest.report import Summary, TargetResult
from memotest.runner import Outcome, Runner
from memotest.store import STORE_DIR, Record, Store
from memotest.validate import Ignore, make_record

FLAKY_ATTEMPTS = 3


@dataclass
class Options:
    jobs: int
    force: bool = False
    dry_run: bool = False
    no_cache: bool = False
    verbose: bool = False


def select(project: Project, names: Iterable[str]) -> list[Target]:
    """The named targets (exact names, ``foreach`` groups or globs) and everything they
    need, in targets-file order. No names: every target."""
    names = list(names)
    if not names:
        return list(project.targets.values())
    wanted: set[str] = set()
    for name in names:
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


def file_states(project: Project) -> FileStates:
    """A build's file-system snapshot; ignored paths are left out of directory listings."""
    ignore = Ignore(
        project.settings.ignore, str(project.root), folders=[str(project.root / STORE_DIR)]
    )
    custom = None
    hook = plugins.manager().hook.memotest_fingerprint
    if hook.get_hookimpls():

        def custom(path: str) -> str | None:
            return plugins.call("memotest_fingerprint", path=path)

    return FileStates(skip_entry=ignore, custom_digest=custom)


class Build:
    def __init__(
        self, project: Project, store: Store | None, options: Options, config: Config
    ) -> None:
        self.project = project
        self.store = store
        self.options = options
        self.config = config
        self.hook = config.hook
        self.settings = project.settings
        self.states = file_states(project)
        self.runner = Runner()
        self.ignore_patterns = self.settings.ignore
        self.store_dir = str(project.root / STORE_DIR)

    # -- the loop ------------------------------------------------------------------------

    def run(self, targets: list[Target]) -> Summary:
        summary = Summary()
        started = time.monotonic()
        plugins.call("memotest_build_start", targets=targets, config=self.config)
        order = {t.name: i for i, t in enumerate(targets)}
        by_name = {t.name: t for t in targets}
        waiting: dict[str, Target] = {t.name: t for t in targets}
        ready: list[Target] = []
        done: dict[str, str] = {}
        running: dict[cf.Future[Outcome], Target] = {}
        verdicts: dict[str, Fresh | Stale] = {}

        def finish(result: TargetResult) -> None:
            done[result.name] = result.status
            summary.results.append(result)
            if result.status in ("failed", "timeout", "error") and summary.first_failure is None:
                summary.first_failure = time.monotonic() - started
            plugins.call("memotest_after_target", target=by_name[result.name], result=result)

        pool = cf.ThreadPoolExecutor(max_workers=self.options.jobs)
        try:
            while waiting or ready or running:
                # Targets whose needs all finished become ready (or skipped).
                newly = []
                for name, t in list(waiting.items()):
                    states = [done.get(n) for n in t.needs]
                    if any(s is None for s in states):
                        continue
                    del waiting[name]
                    bad = [n for n in t.needs if done[n] not in ("passed", "cached")]
                    if bad:
                        finish(
                            TargetResult(
                                name, "skipped", 0.0, reason=f"needs {bad[0]}, which {done[bad[0]]}"
                            )
                        )
                        continue
                    newly.append(t)
                if newly:
                    verdicts.update(self.check(newly))
                    for t in newly:
                        v = verdicts[t.name]
                        if isinstance(v, Fresh) and not self.options.dry_run:
                            finish(self.replay(t, v.record))
                        elif self.options.dry_run:
                            finish(self.dry_result(t, v))
                        else:
                            ready.append(t)
                    ready.sort(key=lambda t: order[t.name])
                    continue
                # Start what fits.
                while ready and len(running) < self.options.jobs:
                    t = ready[0]
                    exclusive = "exclusive" in t.tags
                    if running and (
                        exclusive or any("exclusive" in r.tags for r in running.values())
                    ):
                        break
                    ready.pop(0)
                    running[pool.submit(self.execute, t)] = t
                if running:
                    plugins.call(
                        "memotest_target_running", names=[t.name for t in running.values()]
                    )
                    finished, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
                    for fut in finished:
                        t = running.pop(fut)
                        outcome = fut.result()
                        finish(self.record(t, outcome, verdicts.get(t.name)))
                elif ready:  # pragma: no cover - defensive: nothing running, nothing fits
                    raise RuntimeError("scheduler stalled")
        except KeyboardInterrupt:
            self.runner.kill_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        summary.duration = time.monotonic() - started
        summary.results.sort(key=lambda r: order.get(r.name, 0))
        return summary

    def check(self, targets: list[Target]) -> dict[str, Fresh | Stale]:
        if self.store is None or self.options.no_cache:
            return {t.name: Stale("forced", "--no-cache") for t in targets}
        tkeys = {t.name: keymod.target_key(t, self.settings) for t in targets}
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
        for rel, digest in record.outputs.items():
            self.store.restore_file(digest, os.path.join(target.cwd, rel))
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
    ) -> TargetResult:
        """Stores the outcome of a run (unless --no-cache) and returns its result line."""
        reason = verdict.reason if isinstance(verdict, Stale) else None
        result = TargetResult(
            target.name,
            outcome.status,
            outcome.duration,
            outcome.exit_code,
            reason=outcome.error or reason,
            log=outcome.log,
            flaky=outcome.attempts > 1 and outcome.status == "passed",
        )
        if outcome.trace is not None:
            # What the target wrote is no longer what this build's snapshot says.
            self.states.forget(outcome.trace.writes | outcome.trace.deleted)
        if self.store is None or self.options.no_cache or outcome.trace is None:
            return result
        if self.runner.interrupted.is_set():
            return result
        rec = make_record(
            target,
            outcome,
            key=keymod.target_key(target, self.settings),
            states=self.states,
            store=self.store,
            ignore=self.ignore_patterns,
            root=self.project.root,
        )
        self.store.put(rec)
        if not rec.cacheable and outcome.status == "passed":
            result.note = f"not cached: {rec.uncacheable_reason}"
        return result


def interrupt_on_sigterm() -> Callable[[], None]:
    """Treat SIGTERM like Ctrl-C for the duration of a build; returns the undo."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)
