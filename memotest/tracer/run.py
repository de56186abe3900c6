"""Runs one command under the tracer: the shim in every process, psutil around the tree."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from memotest.lazy import lazy_module
from memotest.model import Incomplete, Trace
from memotest.tracer import listing_reports, shim
from memotest.tracer.collect import build_trace
from memotest.tracer.fold import resolve_dotdot
from memotest.tracer.log import read as read_log
from memotest.tracer.procwatch import ProcessWatcher, become_subreaper

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_module("psutil")  # imported while a run is watched only

_subreaper = False


class TracedRun:
    """A command running under the tracer.

    ``start()`` launches it in its own process group; ``wait()`` waits (optionally with a
    timeout); ``kill()`` ends the whole tree; ``finish()`` returns the :class:`Trace`.
    Use it as a context manager so the trace folder is always removed.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: int | IO | None = subprocess.DEVNULL,
        stdout: int | IO | None = None,
        stderr: int | IO | None = None,
        trace_root: str | None = None,
        new_session: bool = True,
        launcher: Callable[..., Any] | None = None,
    ) -> None:
        global _subreaper
        if not _subreaper:
            become_subreaper()
            _subreaper = True
        self.argv = list(argv)
        self.cwd = cwd
        self.lib = shim.shim_path()
        self.dir = tempfile.mkdtemp(prefix="memotest-trace-", dir=trace_root)
        self.log_path = os.path.join(self.dir, "log")
        self.status_path = os.path.join(self.dir, "status")
        with open(self.log_path, "wb"):
            pass
        with open(self.status_path, "wb") as f:
            f.write(b"0")
        base = dict(os.environ if env is None else env)
        self.env = shim.traced_environ(base, self.dir)
        # Where a plain pytest process reports its listings (``tracer/listing_reports.py``).
        self.env.update(listing_reports.prepare(self.dir))
        self._stdio = (stdin, stdout, stderr)
        self.new_session = new_session
        #: What starts the command: ``subprocess.Popen``, or a warm worker's ``spawn``
        #: (``memotest.tracer.warm``), which returns a Popen-like handle whose
        #: ``prior_events`` (the worker's start-up) come before the run's own log.
        self.launcher = launcher or subprocess.Popen
        self.proc: Any = None
        self.watcher: ProcessWatcher | None = None
        self.started_ns = 0
        self.fs_started_ns = 0
        self.finished_ns = 0

    def __enter__(self) -> TracedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self) -> TracedRun:
        """Starts the command. Raises FileNotFoundError/PermissionError as Popen does."""
        stdin, stdout, stderr = self._stdio
        self.fs_started_ns = fs_clock(os.path.join(self.dir, "start"))
        self.started_ns = time.time_ns()
        self.proc = self.launcher(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=self.new_session,
        )
        self.watcher = ProcessWatcher(self.proc.pid, self.lib, self.dir)
        owner = getattr(self.proc, "owner", None)
        if owner is not None:
            # A warm worker's run: the worker is not part of it, but a process forked
            # (not exec'd) in the run and orphaned carries the worker's environment.
            pid, trace_dir = owner
            self.watcher.foreign.add(pid)
            self.watcher.ours_dirs.add(trace_dir)
        self.watcher.start()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, or None if the command is still running after ``timeout``."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self, grace: float = 1.0) -> None:
        """Ends the whole tree: SIGTERM to the process group and to every descendant psutil
        finds (also those that left the group with setsid), then SIGKILL to whatever is
        left after ``grace`` seconds, looking again for processes forked meanwhile."""
        assert self.proc is not None and self.watcher is not None
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0), (signal.SIGKILL, 2.0)):
            victims = self._victims()
            if not victims:
                break
            if self.new_session:
                with contextlib.suppress(OSError):
                    os.killpg(self.proc.pid, sig)  # the group, including what polling missed
            for p in victims:
                _signal(p, sig)
            psutil.wait_procs(victims, timeout=wait)
        self.proc.wait()
        self.watcher.reap_orphans()

    def _victims(self) -> list[psutil.Process]:
        assert self.proc is not None and self.watcher is not None
        root = []
        if self.proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                root = [psutil.Process(self.proc.pid)]
        return root + self.watcher.alive_descendants()

    def finish(self, *, kill_leftovers: bool = True) -> Trace:
        """Waits for the command and returns its trace. Descendants still running when the
        command itself has exited make the trace incomplete (and are killed by default)."""
        assert self.proc is not None and self.watcher is not None
        code = self.proc.wait()
        self.finished_ns = time.time_ns()
        leftovers = self.watcher.stop()  # the last look also finds what is still running
        events, damage = read_log(self.log_path)
        prior = getattr(self.proc, "prior_events", None)
        owner = getattr(self.proc, "owner", None)
        own_paths: set[str] | None = None
        folded = None
        if prior:
            # What the run's own events name (each field: more than paths, never fewer).
            own_paths = {resolve_dotdot(f) for ev in events for f in ev.fields}
            fold = getattr(self.proc, "folded", None)
            if fold is not None:
                folded = fold()  # the worker's start-up, folded once for its runs
            else:
                events = [*prior, *events]
        with open(self.status_path, "rb") as f:
            lost = f.read(1) != b"0"
        report = getattr(self.proc, "report", None)
        reports = listing_reports.read(self.dir)
        vouched: tuple[int, ...] = ()
        if isinstance(report, dict) and "listings" in report:
            # A warm worker's run reports for itself and for the worker it was forked from.
            own = report["listings"] if isinstance(report["listings"], dict) else None
            vouched = (self.proc.pid, owner[0]) if owner else (self.proc.pid,)
            reports.update(dict.fromkeys(vouched, own))
        trace = build_trace(
            command=self.argv,
            exit_code=code,
            root_pid=self.proc.pid,
            events=events,
            damage=damage,
            records_lost=lost,
            seen=list(self.watcher.seen.values()),
            leftovers=leftovers,
            shim=self.lib,
            trace_dir=self.dir,
            worker_pid=owner[0] if owner else None,
            listing_reports=reports,
            vouched=vouched,
            own_reads=getattr(self.proc, "own_reads", ()),
            prior=folded,
        )
        trace.started_ns, trace.finished_ns = self.started_ns, self.finished_ns
        trace.fs_started_ns = self.fs_started_ns
        if own_paths is not None:
            trace.forked, trace.own_paths = getattr(self.proc, "held", None), own_paths
            trace.shared = getattr(self.proc, "shared", None)
        if isinstance(report, dict) and isinstance(report.get("code"), dict):
            trace.code = report["code"]
            if isinstance(report.get("phases"), dict):
                trace.phases = report["phases"]
        if isinstance(report, dict) and isinstance(report.get("sections"), list):
            trace.sections = set(report["sections"])
        if getattr(self.proc, "lost", None):
            trace.incomplete.append(Incomplete(self.proc.pid, None, self.proc.lost))
            trace.complete = False
        if leftovers and kill_leftovers:
            for p in leftovers:
                _signal(p, signal.SIGKILL)
            psutil.wait_procs(leftovers, timeout=2.0)
            self.watcher.reap_orphans()
        return trace


def _signal(p: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.Error):
        p.send_signal(sig)


def trace_command(argv: list[str], **kwargs) -> Trace:
    """Runs ``argv`` to completion under the tracer and returns its trace."""
    with TracedRun(argv, **kwargs) as run:
        run.start()
        return run.finish()


def fs_clock(marker: str) -> int:
    """The file system's clock now: the change time the kernel gives ``marker`` as it is
    written (0 if it cannot be; the start is then taken with a slack,
    :func:`memotest.model.changed_since`)."""
    try:
        with open(marker, "wb") as f:
            f.write(b"0")
            return os.fstat(f.fileno()).st_ctime_ns
    except OSError:
        return 0
