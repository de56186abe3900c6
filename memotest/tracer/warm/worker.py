"""One warm worker: its process, its start-up, its channel, and the runs it forks.

The worker (``memotest/worker/``) is started under the tracer like any run. When it says
it is ready, its trace up to then is read: the paths it observed are snapshot (``_sig``),
the preloaded modules whose import looked at the project's files are refused
(``preload.project_reads``), and a worker whose start-up was not traced completely, or whose
inputs changed while it started, is not used. Then a thread reads its answers: the pid of
each run it forked, and how each run ended with the run's report (``remote.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from typing import IO, Any

from memotest._executed import extension_path
from memotest.inputs.readers import worker_table
from memotest.model import StatSig
from memotest.tracer import shim
from memotest.tracer.collect import build_trace
from memotest.tracer.fold import Fold
from memotest.tracer.log import Event
from memotest.tracer.log import read as read_log
from memotest.tracer.procwatch import Seen
from memotest.tracer.warm.channel import Channel
from memotest.tracer.warm.command import worker_argv
from memotest.tracer.warm.preload import PRELOAD_MARK, project_reads
from memotest.tracer.warm.reading import read_report
from memotest.tracer.warm.remote import RemoteProcess
from memotest.tracer.warm.spec import WarmSpec, WarmUnavailable
from memotest.tracer.warm.stale import not_as_they_were
from memotest.tracer.warm.startup import A_DIR, not_ready, own_folder_left_out, path_sig
from memotest.tracer.warm.vouched import vouched_reads
from memotest.worker import codes

#: How long a worker may take to import its modules.
WARMUP_TIMEOUT = 120.0
CHANGED_WHILE_STARTING = "a file it read changed while it started"


class Worker:
    """One warm process. It forks any number of runs at once (one per job slot); a
    thread reads its answers: the pid of each run it forked, and how each run ended."""

    #: The files it read that its watchers vouch for (``vouched.py``).
    vouched: frozenset[str] = frozenset()

    def __init__(
        self,
        spec: WarmSpec,
        work_root: str | None = None,
        preload: tuple[str, ...] = (),
        code_level: bool = False,
        whole: frozenset[str] = frozenset(),
        config: Any = None,
        prepared_preload: tuple[str, ...] = (),
    ) -> None:
        from memotest.tracer.run import TracedRun  # run.py imports this package

        self.spec = spec
        #: The command line's ``memotest.load.plugins.Config``, for the hooks (None: none).
        self.config = config
        #: Modules imported after ``spec.modules`` (``preload.py``); ``refused`` names
        #: those whose import warned, printed, started a thread or read the project's
        #: files, and why.
        self.preload = preload
        #: Whether its runs report the code they executed (``inputs/code.py``), but those
        #: whose arguments (JSON) are in ``whole`` (their files stay whole: ``preload.py``).
        self.code_level = code_level
        self.whole = whole
        #: Imported after the plugin prepared the runs, under its hooks (``prepared_for``).
        self.prepared_preload = prepared_preload if spec.prepare else ()
        self.refused: list[tuple[str, str]] = []
        #: Every module the preload imported (its dependencies too), the prepared preload's,
        #: and what the preparation marked (to be imported fresh: ``reading.py``).
        self.preloaded: frozenset[str] = frozenset()
        self.preloaded_prepared = self.prepared_fresh = frozenset[str]()
        self.dir = tempfile.mkdtemp(prefix="memotest-worker-", dir=work_root)
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        self.err_path = os.path.join(self.dir, "stderr")
        self._err = open(self.err_path, "wb")  # noqa: SIM115 - closed by close()
        cfg = {
            "modules": spec.modules,
            "prepare": list(spec.prepare),
            "preload": preload,
            "preload_prepared": self.prepared_preload,
            "mark": PRELOAD_MARK,
            "shim": shim.shim_path(),
            "executed": extension_path() if code_level else None,
            "code": code_level,
            # How runs note the code they execute on Python 3.12+: sys.monitoring, or the
            # extension's frame-evaluation hook (``frame-hook``, to compare them).
            "noting": os.environ.get("MEMOTEST_CODE_NOTING", "monitoring"),
            "tag": codes.cache_tag(),
            "readers": worker_table(),
        }
        self.run = TracedRun(
            worker_argv(spec.python, cfg, code_level, config),
            cwd=spec.cwd,
            env=dict(spec.env, TMPDIR=tmp, TMP=tmp, TEMP=tmp),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            trace_root=self.dir,
        )
        self.events: list[Event] = []
        #: What each path the worker observed while starting was: see ``_sig``.
        self.snapshot: dict[str, StatSig | str | None] = {}
        self._listed: frozenset[str] = frozenset()
        #: What its runs' records found of the paths of ``snapshot`` (new with each
        #: snapshot: ``recording/shared.py``).
        self.shared: dict = {}
        self.folded: tuple[list[Event], Fold] | None = None  # ``remote.start_folded``
        #: The folders of the project only its imports listed: what they looked for there,
        #: and what of it they saw (``worker/listings.py``).
        self._views: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self.usable = False
        self.why = ""
        self._lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, queue.SimpleQueue[dict[str, Any] | None]] = {}
        self._runs: dict[int, RemoteProcess] = {}
        #: Ends (status, report) that came before their run was known.
        self._ended: dict[int, tuple[int, dict[str, Any] | None]] = {}
        self._gone = False
        self._reader: threading.Thread | None = None
        #: The processes its start-up's watchers saw; its ready answers after a promotion.
        self.seen: list[Seen] = []
        self.logged = 0  # how many events its trace had at its first ready answer
        self.promoted: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()

    def start(self) -> bool:
        """Starts the worker and waits until it is ready; False if it cannot be used
        (``why`` says why)."""
        started_ns = time.time_ns()
        try:
            self.run.start()
        except OSError as exc:
            self.why = f"cannot start {self.spec.python}: {exc.strerror}"
            return False
        proc = self.run.proc
        assert proc is not None and proc.stdout is not None and self.run.watcher is not None
        chan = Channel(proc.stdout)
        try:
            msg = chan.read(WARMUP_TIMEOUT)
        except TimeoutError:
            msg = None
        self.run.watcher.stop()  # from now on the worker itself does nothing to trace
        self.seen = list(self.run.watcher.seen.values())
        log = read_log(self.run.log_path)
        self.logged = len(log[0])
        if not self.take_ready(msg, started_ns, log):
            return False
        self._reader = threading.Thread(
            target=self._read, args=(chan,), name="memotest-warm", daemon=True
        )
        self._reader.start()
        self.usable = True
        return True

    def take_ready(
        self, msg: dict[str, Any] | None, started_ns: int, log: tuple[list[Event], str | None]
    ) -> bool:
        """Reads the worker's ready answer ``msg`` and its trace (``log``: its events
        and damage) up to it; whether it can be used (else ``why`` says why)."""
        if not msg or not msg.get("ready"):
            self.why, self.refused = not_ready(msg, self.err_path)
            return False
        events, damage = log
        events, self.refused = project_reads(events, self.spec.cwd, msg.get("roots") or [])
        events = own_folder_left_out(events, self.dir)
        events, self.vouched = vouched_reads(events, self.run.pid)
        self.preloaded = frozenset(msg.get("preloaded") or ())
        self.preloaded_prepared = frozenset(msg.get("prepared_preloaded") or ())
        if isinstance(prepared := msg.get("prepared"), dict) and prepared:
            self.prepared_fresh = read_report(prepared, self.config).fresh
        if self.refused:
            self.why = "preloading {}: {}".format(*self.refused[0])
            return False
        with open(self.run.status_path, "rb") as f:
            lost = f.read(1) != b"0"
        trace = build_trace(
            command=self.run.argv,
            exit_code=0,
            root_pid=self.run.pid,
            events=events,
            damage=damage,
            records_lost=lost,
            seen=self.seen,
            leftovers=[],
            shim=self.run.lib,
            trace_dir=self.run.dir,
        )
        if not trace.complete:
            self.why = f"its start-up was not traced completely ({trace.incomplete[0].reason})"
            return False
        self.events = events  # a new list: the runs forked so far keep theirs
        paths = trace.reads | trace.stats | trace.missing | trace.listed | trace.loaded
        paths |= trace.execs
        self._listed = frozenset(trace.listed)
        before = self.snapshot
        self.snapshot = {p: path_sig(p, p in self._listed) for p in sorted(paths)}
        self.shared = {}
        views = msg.get("views") or {}
        self._views = {
            p: (frozenset(views[p][0]), frozenset(views[p][1]))
            for p in self._listed
            if p in views and p not in trace.listed_elsewhere
        }
        for p, sig in self.snapshot.items():
            if p in before and before[p] == sig:
                continue  # as it was when it was last ready (``promote.py``)
            since = p not in before or before[p] == A_DIR  # observed, or listed, since
            if since and not (isinstance(sig, StatSig) and sig.touched_since(started_ns)):
                continue
            if p in self._views and isinstance(sig, StatSig) and self._view_holds(p):
                continue  # what changed is nothing its imports looked for
            self.why = CHANGED_WHILE_STARTING
            return False
        return True

    def idle(self) -> bool:
        """Whether it is usable and every run it forked has ended."""
        with self._lock:
            return self.usable and not self._gone and not self._runs and not self._replies

    def hold(self) -> bool:
        """Takes it out of use if it is :meth:`idle` (``promote.py``); whether it was."""
        with self._lock:
            if not self.usable or self._gone or self._runs or self._replies:
                return False
            self.usable = False
            return True

    def release(self) -> bool:
        """Puts it back in use (``promote.py``), unless it ended meanwhile."""
        with self._lock:
            self.usable = not self._gone
            return self.usable

    def changed(self) -> str | None:
        """The first path the worker observed while starting that is no longer as it was.
        A folder of the project only its imports listed holds while the entries they looked
        for are as the worker saw them (``worker/listings.py``)."""
        for p, now in not_as_they_were(self.snapshot, self._listed):
            if p in self._views and isinstance(now, StatSig) and self._view_holds(p):
                self.snapshot[p] = now
                continue
            return p
        return None

    def _view_holds(self, folder: str) -> bool:
        """Whether ``folder`` still has the entries the worker's imports looked for and saw
        (and none of the others they looked for)."""
        looks, seen = self._views[folder]
        try:
            names = os.listdir(folder)
        except OSError:
            return False
        return {n for n in names if n in looks} == seen

    def spawn(
        self,
        argv: list[str],
        *,
        cwd: str | None,
        env: dict[str, str],
        stdout: IO[bytes],
        spec: WarmSpec | None = None,
        phases: bool = False,
        **_: object,
    ) -> RemoteProcess:
        """Forks a run of ``argv`` (``PYTHON -m MODULE ARGS``), the Popen of a TracedRun,
        which also maps each labelled part's code if ``phases`` (``--select tests``).
        Raises :class:`WarmUnavailable` when the worker cannot take it (or is no longer a
        worker of ``spec``: :meth:`promote`)."""
        proc = self.run.proc
        if not self.usable or proc is None or proc.stdin is None:
            raise WarmUnavailable(self.why or "the worker is not ready")
        changed = self.changed()
        if changed is not None:
            self.usable = False
            self.why = f"{changed} changed"
            raise WarmUnavailable(self.why)
        answer: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        with self._lock:
            if self._gone:
                raise WarmUnavailable(self.why)
            if not self.usable or (spec is not None and spec != self.spec):
                raise WarmUnavailable("the worker now prepares other runs")
            self._next_id += 1
            job_id = self._next_id
            self._replies[job_id] = answer
            job = {
                "id": job_id,
                "module": argv[2],
                "args": argv[3:],
                "cwd": cwd or self.spec.cwd,
                "env": env,
                "trace_dir": env["MEMOTEST_TRACE_DIR"],
                "log": stdout.name,
                "code": self.code_level and json.dumps(argv[3:]) not in self.whole,
                "listings": self.code_level,
                "phases": phases,
            }
            try:
                proc.stdin.write((json.dumps(job) + "\n").encode())
                proc.stdin.flush()
            except (OSError, ValueError):
                self._replies.pop(job_id, None)
                self.usable = False
                self.why = "the worker stopped answering"
                raise WarmUnavailable(self.why) from None
        try:
            msg = answer.get(timeout=WARMUP_TIMEOUT)
        except queue.Empty:
            msg = None
        if msg is None:
            self.usable = False
            self.why = "the worker stopped answering"
            raise WarmUnavailable(self.why)
        pid = int(msg["pid"])
        run = RemoteProcess(self, pid)
        with self._lock:
            if pid in self._ended:
                run.ended(*self._ended.pop(pid))
            elif self._gone:
                run.lose()
            else:
                self._runs[pid] = run
        return run

    def _read(self, chan: Channel) -> None:
        """The reader thread: hands each answer to whoever waits for it."""
        while True:
            try:
                msg = chan.read(None)
            except (OSError, ValueError):
                msg = None
            with self._lock:
                if msg is None:
                    self._gone = True
                    self.usable = False
                    self.why = self.why or "the worker ended"
                    waiting, self._replies = list(self._replies.values()), {}
                    lost, self._runs = list(self._runs.values()), {}
                elif "ready" in msg:  # ready again, once promoted
                    self.promoted.put(msg)
                    continue
                elif "id" in msg:
                    answer = self._replies.pop(int(msg["id"]), None)
                    if answer is not None:
                        answer.put(msg)
                    continue
                else:
                    pid, status = int(msg["pid"]), int(msg["status"])
                    report = msg.get("report")
                    report = report if isinstance(report, dict) else None
                    run = self._runs.pop(pid, None)
                    if run is None:
                        self._ended[pid] = (status, report)
                    else:
                        run.ended(status, report)
                    continue
            self.promoted.put(None)
            for answer in waiting:
                answer.put(None)
            for run in lost:
                run.lose()
            return

    def close(self) -> None:
        """Stops the worker (killing runs it still has) and removes its folder."""
        self.usable = False
        proc = self.run.proc
        if proc is not None:
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()  # the worker ends at end of file, once its runs end
            try:
                proc.wait(2.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(Exception):
                    self.run.kill(grace=0.5)
        if self._reader is not None:
            self._reader.join(5.0)
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        self.run.__exit__(None, None, None)
        self._err.close()
        shutil.rmtree(self.dir, ignore_errors=True)
