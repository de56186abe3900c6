"""Runs one target under the tracer: private TMPDIR, captured log, timeout, retries.

This is the "run under tracer" arrow: a :class:`Target` goes in, an :class:`Outcome` with
the :class:`Trace` comes out. Deciding whether to run, and what to store, is elsewhere.

**Skips.** A command may say that it did not do its work (a test runner that skipped
every test for want of an interpreter, a nox session nox skipped): every run gets
``MEMOTEST_SKIP_FILE``, a path in its own folder (never an input, not part of the key),
and a command that writes a reason there and exits 0 ends ``skipped``, with that reason.
A skip is never a pass: it is reported as skipped, not counted as a failure (exit status
0), recorded so that ``explain`` says "last run was skipped", and never replayed (the
next build runs it again, since what made it skip, an interpreter found on PATH or not,
may be seen only in part). A non-zero exit status stays a failure whatever the file says.
The adapters turn their tool's own skips into this (``memotest_nox.session``,
``memotest_tox.run_env``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import BinaryIO

from memotest.errors import inject
from memotest.model import Outcome, Target, Trace
from memotest.run.scratch import make_fresh
from memotest.run.testcases import RESULTS_ENV, read_results
from memotest.tracer.run import TracedRun
from memotest.tracer.warm.pool import WorkerPool
from memotest.tracer.warm.remote import RemoteProcess
from memotest.tracer.warm.spec import WarmSpec, WarmUnavailable

#: The variable naming the file a command writes a reason into to end ``skipped``.
SKIP_FILE = "MEMOTEST_SKIP_FILE"
#: The longest reason read from it.
SKIP_REASON_MAX = 500


def _skipped(outcome: Outcome, path: str) -> None:
    """Makes a passing ``outcome`` skipped when the command wrote a reason into ``path``."""
    if outcome.status != "passed" or outcome.exit_code != 0:
        return
    try:
        with open(path, "rb") as f:
            text = f.read(SKIP_REASON_MAX * 4).decode("utf-8", "replace")
    except OSError:
        return
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    outcome.status = "skipped"
    outcome.skip_reason = ("; ".join(lines) or "skipped")[:SKIP_REASON_MAX]


class Runner:
    """Starts targets and keeps track of the running ones so Ctrl-C can end them all."""

    def __init__(self, work_root: str | None = None, *, pool: WorkerPool | None = None) -> None:
        self.work_root = work_root
        #: The warm workers that targets declaring ``warm`` modules are forked from
        #: (``tracer/warm/``); None: every target starts as a fresh process (``--no-warm``).
        #: Whoever made the pool closes it.
        self.pool = pool
        #: Whether forked runs label their parts' code (``--select tests`` reads it; the
        #: build sets it: ``memotest/drive/step.py``). Off, a run notes each code object
        #: once instead of again in every test.
        self.phases = False
        self._running: set[TracedRun] = set()
        self._lock = threading.Lock()
        #: How many commands this runner has launched: a build waits for the ones it
        #: started before it does work of its own that would slow their start down
        #: (:meth:`wait_launched`).
        self.launched = 0
        self._launch = threading.Condition(self._lock)
        self.interrupted = threading.Event()

    def wait_launched(self, count: int, timeout: float) -> None:
        """Until ``count`` commands were launched in all, or ``timeout`` seconds passed (a
        run that fails to start is never counted)."""
        with self._launch:
            self._launch.wait_for(lambda: self.launched >= count, timeout)

    def run(self, target: Target, env: dict[str, str], tee: BinaryIO | None = None) -> Outcome:
        """Runs ``target`` to completion (or timeout) under the tracer. Its output goes to
        a log file (``Outcome.log``); with ``tee``, it is also copied there as it comes."""
        work = tempfile.mkdtemp(prefix="memotest-", dir=self.work_root)
        tmpdir = os.path.join(work, "tmp")
        os.mkdir(tmpdir)
        log_path = os.path.join(work, "log")
        skip_file = os.path.join(work, "skip")
        # The run's per-test results (memotest/run/testcases.py): in its own folder, so
        # never an input, an output nor shared with another run.
        results = os.path.join(work, "tests.jsonl")
        per_run = {SKIP_FILE: skip_file, RESULTS_ENV: results}
        env = dict(env, TMPDIR=tmpdir, TMP=tmpdir, TEMP=tmpdir, **per_run)
        started = time.monotonic()
        try:
            with open(log_path, "wb") as log:
                follower = _Follower(log_path, tee) if tee is not None else None
                try:
                    outcome = self._run_traced(target, env, log, tmpdir, started)
                finally:
                    if follower is not None:
                        follower.finish()
            with open(log_path, "rb") as f:
                outcome.log = f.read()
            outcome.tests = read_results(results)
            outcome.workdir = work
            _skipped(outcome, skip_file)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return outcome

    def _run_traced(
        self,
        target: Target,
        env: dict,
        log,
        tmpdir: str,
        started: float,
        warm: bool = True,
        fresh: str | None = None,
    ) -> Outcome:
        if not os.path.isdir(target.cwd):
            return self._error(target, f"cwd {target.cwd} does not exist", started)
        scratch = make_fresh(target.scratch, target.cwd)  # the run's own, as its TMPDIR
        worker, spec = self._worker(target, env) if warm else (None, None)
        traced = TracedRun(
            target.argv,
            cwd=target.cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            trace_root=self.work_root,
            # the worker takes the run only while it is a worker of ``spec`` (a worker
            # whose runs all ended may become one that prepares its runs: ``promote``)
            launcher=(
                functools.partial(worker.spawn, spec=spec, phases=self.phases)
                if worker is not None
                else None
            ),
        )
        with traced:
            try:
                try:
                    traced.start()
                except WarmUnavailable as exc:
                    fresh = f"the worker could not take it: {exc}"
                    traced.launcher = subprocess.Popen  # a fresh process, as without one
                    traced.start()
            except OSError as exc:
                return self._error(target, f"cannot run {target.argv[0]}: {exc.strerror}", started)
            with self._lock:
                self._running.add(traced)
                self.launched += 1
                self._launch.notify_all()
            try:
                if self.interrupted.is_set():  # kill_all looked before this run was listed
                    with contextlib.suppress(Exception):
                        traced.kill(grace=0.5)
                code = traced.wait(target.timeout)
                status = "passed"
                if code is None:
                    traced.kill()
                    status = "timeout"
                elif self.interrupted.is_set():
                    status = "error"
                try:
                    inject("trace")
                    trace = traced.finish()
                except Exception as exc:  # the command ran: its result stands (faults.py)
                    return self._faulted(target, traced, status, exc, tmpdir, started, scratch)
            finally:
                with self._lock:
                    self._running.discard(traced)
        remote = traced.proc if isinstance(traced.proc, RemoteProcess) else None
        pool = self.pool
        if target.warm:
            trace.code_whole = kept_whole(pool, worker, remote, fresh)
        if remote is not None and worker is not None and pool is not None:
            pool.learn(worker.spec, remote)
            whole = (remote.report or {}).get("code")
            if isinstance(whole, str):
                pool.note(f"a run kept its Python files whole ({whole})")
            crashed = worker.code_level and trace.exit_code in CRASHES
            if (
                (remote.unfaithful or crashed)
                and not self.interrupted.is_set()
                and status != "timeout"
            ):
                if crashed:
                    # Noting the code that runs costs C stack for each Python call (no
                    # inlined calls): a recursion deep enough may crash where it would
                    # not in a fresh process.
                    pool.note(f"{target.name} ran again, fresh: it crashed in a worker")
                    fresh = "it crashed in a worker"
                else:
                    fresh = "; ".join(remote.unfaithful)
                    pool.note(f"{target.name} ran again, fresh: {fresh}")
                # The run wanted a module the worker had preloaded imported afresh (a
                # plugin's import hook would have rewritten it), or the run's sys.path
                # would have found it elsewhere, or a plugin said why else (a conftest
                # its worker did not configure): not the result a fresh run would give.
                # Run it again, fresh (tracer/warm/preload.py).
                log.seek(0)
                log.truncate()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(env[RESULTS_ENV])
                shutil.rmtree(tmpdir, ignore_errors=True)
                os.mkdir(tmpdir)
                return self._run_traced(target, env, log, tmpdir, started, False, fresh)
        return self._ended(
            target, status, trace.exit_code, tmpdir, started, trace=trace, scratch=scratch
        )

    def _faulted(
        self,
        target: Target,
        traced: TracedRun,
        status: str,
        exc: Exception,
        tmpdir: str,
        started: float,
        scratch: tuple[str, ...] = (),
    ) -> Outcome:
        """The outcome of a run whose trace memotest failed to read: the command's own
        exit status, no trace (so no record), and the failure to report
        (:mod:`memotest.drive.faults`)."""
        with contextlib.suppress(Exception):  # what it left running, as finish() would
            traced.kill()
        code = traced.proc.returncode if traced.proc is not None else None
        return self._ended(target, status, code, tmpdir, started, fault=exc, scratch=scratch)

    def _ended(
        self,
        target: Target,
        status: str,
        code: int | None,
        tmpdir: str,
        started: float,
        *,
        trace: Trace | None = None,
        fault: Exception | None = None,
        scratch: tuple[str, ...] = (),
    ) -> Outcome:
        """The outcome of a run that ended with ``code`` (``status`` so far: passed,
        timeout or error)."""
        if status == "passed" and code != 0:
            status = "failed"
        if self.interrupted.is_set():
            status = "error"
        finished = time.monotonic()
        return Outcome(
            target=target,
            status=status,
            exit_code=None if status == "timeout" else code,
            duration=finished - started,
            log=b"",
            trace=trace,
            tmpdir=tmpdir,
            scratch=scratch,
            started=started,
            finished=finished,
            fault=fault,
        )

    def _worker(self, target: Target, env: dict[str, str]):
        """The warm worker that can run ``target``, if there is one, and its spec."""
        if self.pool is None or not target.warm or self.interrupted.is_set():
            return None, None
        spec = WarmSpec.of(target.argv, target.warm, target.cwd, env, target.prepare)
        return (self.pool.worker(spec), spec) if spec is not None else (None, None)

    def _error(self, target: Target, message: str, started: float) -> Outcome:
        now = time.monotonic()
        return Outcome(
            target,
            "error",
            None,
            now - started,
            message.encode("utf-8", "surrogateescape") + b"\n",  # a path in it: its bytes
            error=message,
            started=started,
            finished=now,
        )

    def kill_all(self) -> None:
        """Ends every running target's whole process tree (Ctrl-C)."""
        self.interrupted.set()
        with self._lock:
            running = list(self._running)
        for traced in running:
            with contextlib.suppress(Exception):  # best effort while shutting down
                traced.kill(grace=0.5)


#: Exit statuses of a run killed by a memory fault (``-SIGSEGV``, ``-SIGBUS``).
CRASHES = (-signal.SIGSEGV, -signal.SIGBUS)


class _Follower:
    """Copies what a run writes to its log file to ``out`` while it runs (``tail -f``).

    The command writes to the file itself, as without a follower: a reader that is slow
    or gone (a closed pipe) never blocks nor kills it; copying just stops."""

    POLL_S = 0.1

    def __init__(self, path: str, out: BinaryIO) -> None:
        self.out = out
        self.file = open(path, "rb")  # noqa: SIM115 - closed by finish()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="memotest-tee", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            last = self.done.wait(self.POLL_S)
            if not self._copy() or last:
                return

    def _copy(self) -> bool:
        while chunk := self.file.read(65536):
            try:
                self.out.write(chunk)
                self.out.flush()
            except (OSError, ValueError):
                return False
        return True

    def finish(self) -> None:
        """Copies what is left and stops."""
        self.done.set()
        self.thread.join()
        self.file.close()


def kept_whole(
    pool: WorkerPool | None,
    worker: object,
    remote: RemoteProcess | None,
    fresh: str | None,
) -> str | None:
    """Why a run of a target forked from a warm worker, when it can be, kept its Python
    files whole (``build -v``): None when it noted the code that ran
    (``memotest/worker/code_watch.py``; ``docs/limits.md``)."""
    import json

    from memotest._executed import extension_path

    if remote is None:
        if fresh is not None:
            return f"it ran in a fresh process ({fresh})"
        if pool is None:
            return "it ran in a fresh process (--no-warm)"
        return "it ran in a fresh process (no warm worker could run its command)"
    code = (remote.report or {}).get("code")
    if isinstance(code, str):
        return code
    if isinstance(code, dict):
        return None
    if not getattr(worker, "code_level", False):
        return "--whole-files"
    if extension_path() is None:
        return "memotest/_executed is not built"
    args = json.dumps((remote.report or {}).get("args"))
    if args in getattr(worker, "whole", ()):
        return "an earlier run of it ran Hypothesis's engine (`whole` in .memotest/warm.json)"
    return "its interpreter cannot note the code it runs (not the Python memotest runs on)"
