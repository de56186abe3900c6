"""Warm workers: a run forked from a process that has already started up.

A pytest target spends a good part of its time starting Python and importing pytest before
its file's first test, every time. A target that declares ``warm`` modules (and
whose command is ``PYTHON -m MODULE ARGS...``) can instead be forked from a *worker*: a
process of the same interpreter, folder and environment that imported those modules once.
Each run is a child of the worker that calls the shim's ``memotest_shim_retarget`` (so
what it does from then on goes to its own run's log), takes the run's environment,
folder and stdio, and runs ``MODULE`` as ``python -m`` would.

What this costs the safety contract, and how it is paid:

* What the worker read while starting is part of every run: the worker's own trace (its
  log up to the moment it said it was ready) is put in front of each run's log, so every
  record holds the worker's inputs too, and a record is reused only if they still hold.
* The worker's memory must be what those inputs say. It is started once per build, and
  before every fork its inputs are compared with a stat snapshot taken when it became
  ready (itself checked for changes made while it started): if one changed, the worker
  is stopped and the run starts fresh. A change after the fork is a change during the
  run, which validation sees as for any run (the run's start time is taken before the
  comparison).
* A worker whose start-up could not be traced completely, that failed to import a
  module, or that has a second thread, is not used: its runs start fresh.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memotest._executed import extension_path
from memotest.model import StatSig
from memotest.tracer import codemap, listings, sections, shim
from memotest.tracer.collect import build_trace
from memotest.tracer.log import Event
from memotest.tracer.log import read as read_log
from memotest.tracer.preload import RAN_HYPOTHESIS, PreloadBook, marked

#: How long a worker may take to import its modules.
WARMUP_TIMEOUT = 120.0
CHANGED_WHILE_STARTING = "a file it read changed while it started"
#: Variables set per run, not per worker.
PER_RUN_ENV = ("TMPDIR", "TMP", "TEMP", "MEMOTEST_TRACE_DIR", "MEMOTEST_SHIM")

# Runs in the target's interpreter (which need not be able to import memotest): the
# standard library only. argv[1] is a JSON object: the "modules" to import and the "shim"
# to call. Messages are JSON lines: requests on fd 0, answers on fd 1.
WORKER_SOURCE = r"""
import os, sys
if sys.argv[2:3] == ["listings"]:
    watch_listings()  # listings.py: before anything else lists a folder
    watch_sections()  # sections.py
sys.path[0] = os.getcwd()  # where python -m puts the current folder

def send(obj):
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(1, data):]

def threads():
    return max(threading.active_count(), len(os.listdir("/proc/self/task")))

def preload(names, mark):
    # A module whose import warns, prints or starts a thread is refused (preload.py).
    # Before each import, a lookup of MARK/NAME in the trace tells memotest whose import
    # read what that follows.
    import warnings
    size = lambda: os.fstat(2).st_size
    out = os.dup(1)
    os.dup2(2, 1)  # what an import prints must not reach memotest as an answer
    try:
        for name in names:
            if name in sys.modules:
                continue
            os.path.exists(mark + name)
            before = size()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    importlib.import_module(name)
                except BaseException:
                    pass  # not importable here: the runs import what they can
            sys.stdout.flush()
            sys.stderr.flush()
            if caught:
                return [name, "its import warned: %s" % caught[0].category.__name__]
            if threads() != 1:
                return [name, "its import started a thread"]
            if size() != before:
                return [name, "its import printed"]
    finally:
        os.path.exists(mark)  # the end of the preload
        os.dup2(out, 1)
        os.close(out)
    return None

def roots():
    # The interpreter's own folders: a module found there is not the project's. Its
    # prefixes too (a venv inside the project), but not one the project is in (a system
    # Python in /usr, a project in /usr/src/app).
    import site, sysconfig
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    here = os.path.join(os.getcwd(), "")
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        if not here.startswith(os.path.join(os.path.normpath(prefix), "")):
            found.add(prefix)
    try:
        found.update(site.getsitepackages())
    except Exception:
        pass
    return tuple(sorted(os.path.normpath(p) + os.sep for p in found))

def serve():
    global json, importlib, threading
    import ctypes, gc, importlib, importlib.machinery, json, select, threading
    cfg = json.loads(sys.argv[1])
    errors = []
    for name in cfg["modules"]:
        try:
            importlib.import_module(name)
        except BaseException as exc:
            errors.append("import %s: %r" % (name, exc))
    before = set(sys.modules)
    refused = None if errors else preload(cfg.get("preload") or [], cfg["mark"])
    preloaded = frozenset(set(sys.modules) - before)
    where = roots()
    executed = load_executed(cfg)
    had = frozenset(sys.modules)  # a run reports what it imported beyond these
    retarget = ctypes.CDLL(cfg["shim"]).memotest_shim_retarget
    retarget.argtypes = [ctypes.c_char_p]
    retarget.restype = ctypes.c_int
    if threads() != 1:
        errors.append("more than one thread after start-up")
    if not hasattr(os, "pidfd_open"):
        errors.append("os.pidfd_open is missing (Python 3.9+ on Linux 5.3+)")
    ready = not errors and not refused
    views = finder_views(os.getcwd(), where) if FILL else None
    send({"ready": ready, "errors": errors, "refused": refused, "roots": where,
          "preloaded": sorted(preloaded), "views": views})
    if errors or refused:
        os._exit(0)
    gc.collect()
    gc.freeze()  # what is shared with the children stays shared
    children = {}  # pidfd: (pid, memfd of its report)
    buf, eof = b"", False
    while children or not eof:
        for fd in select.select([*children, *([] if eof else [0])], [], [])[0]:
            if fd in children:
                pid, memfd = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                send({"pid": pid, "status": status, "report": read_report(memfd)})
                continue
            chunk = os.read(0, 65536)
            eof = not chunk
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                job = json.loads(line)
                memfd = os.memfd_create("memotest-report") if hasattr(os, "memfd_create") else -1
                pid = os.fork()
                if pid == 0:
                    for other, (_, their) in children.items():
                        os.close(other)
                        if their >= 0:
                            os.close(their)
                    return job, retarget, memfd, preloaded, had, where, executed
                children[os.pidfd_open(pid)] = (pid, memfd)
                send({"id": job["id"], "pid": pid})
    os._exit(0)

def read_report(memfd):
    if memfd < 0:
        return None
    try:
        os.lseek(memfd, 0, 0)
        data = b""
        while True:
            chunk = os.read(memfd, 1 << 20)
            if not chunk:
                break
            data += chunk
        return json.loads(data) if data else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(memfd)

MARKS = set()

def note_marks():
    # pytest's rewrite hook leaves sys.meta_path when pytest ends: note what it is told
    # to rewrite as it is told.
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    hook = getattr(rewrite, "AssertionRewritingHook", None)
    mark = getattr(hook, "mark_rewrite", None)
    if mark is None:
        return
    def mark_rewrite(self, *names):
        MARKS.update(n for n in names if isinstance(n, str))
        return mark(self, *names)
    mark_rewrite.__wrapped__ = mark
    hook.mark_rewrite = mark_rewrite

def report(preloaded, had, where):
    # The modules this run imported from the interpreter's folders, and the names pytest
    # marked for rewriting: what the next worker may preload (preload.py).
    kinds = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader,
             importlib.machinery.ExtensionFileLoader)
    names = []
    for name, module in list(sys.modules.items()):
        try:  # not getattr: a lazy module (importlib.util.LazyLoader) would load
            spec = object.__getattribute__(module, "__dict__").get("__spec__")
        except Exception:
            continue
        origin = getattr(spec, "origin", None)
        if name in had or name in ("__main__", "__mp_main__") or not isinstance(origin, str):
            continue
        loader = getattr(spec, "loader", None)
        if type(loader) in kinds and os.path.normpath(origin).startswith(where):
            names.append(name)
    return {"modules": names, "marked": sorted(MARKS), "shadowed": shadowed(preloaded)}

def shadowed(preloaded):
    # A preloaded package that the run's own sys.path would have found elsewhere (pytest
    # puts the test file's folder first: tests/helpers.py against site-packages' helpers):
    # the run imported the preloaded one instead, not what a fresh run would have.
    found = []
    for top in sorted({n.split(".", 1)[0] for n in preloaded}):
        try:
            spec = object.__getattribute__(sys.modules[top], "__dict__").get("__spec__")
            have = getattr(spec, "origin", None)
            now = importlib.machinery.PathFinder.find_spec(top)
        except Exception:
            continue
        where = getattr(now, "origin", None)
        if isinstance(have, str) and isinstance(where, str) and where != have:
            try:
                same = os.path.samefile(where, have)
            except OSError:
                same = False
            if not same:
                found.append(top)
    return found

def load_executed(cfg):
    # The extension that notes the code a run executed (codemap.py), if memotest's
    # Python compiles as this one does.
    path = cfg.get("executed")
    if not path or sys.implementation.cache_tag != cfg.get("tag"):
        return None
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("_executed", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module if module.supported else None
    except BaseException:
        return None

OPENED = set()  # .py files opened other than by an import
FORKED = []
INSPECTED = []  # code objects whose function's __code__ was read: they count as run
WITHIN = []

def watch_opens():
    from importlib import _bootstrap_external as bootstrap
    get_data = bootstrap.FileLoader.get_data.__code__
    get_code = bootstrap.SourceLoader.get_code.__code__
    def hook(event, args):
        if event == "object.__getattr__" and len(args) == 2 and args[1] == "__code__":
            # Code read without running it (dis, numba, inspect.signature) counts as run.
            if not WITHIN:
                WITHIN.append(True)
                try:
                    INSPECTED.append(args[0].__code__)
                except Exception:
                    pass
                finally:
                    WITHIN.clear()
            return
        if event != "open" or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path.endswith(".py"):
            return
        caller = sys._getframe(1)
        if caller.f_code is get_data and caller.f_back is not None \
                and caller.f_back.f_code is get_code:
            return  # the import system reading a module's source
        OPENED.add(path if os.path.isabs(path) else os.path.basename(path))
    sys.addaudithook(hook)
    os.register_at_fork(before=lambda: FORKED.append(True))

def code_report(executed, had, where):
    # The code objects this run executed from the project's .py files that an import
    # read, and only an import (codemap.py); or why that cannot be told.
    codes, intact = executed.stop()
    if not intact:
        return "something else took over noting the code run"
    if FORKED:
        return "it forked a Python process"  # code ran where this one cannot see it
    if threads() != 1:
        return "a thread was still running at its end"
    for code in codes:
        if code.co_filename.endswith("/hypothesis/internal/conjecture/engine.py") \
                and qualname(code).startswith("ConjectureRunner."):
            return RAN_HYPOTHESIS  # another run tries other examples: other code
    sources = set()
    here = os.path.join(os.getcwd(), "")
    for name, module in list(sys.modules.items()):
        try:
            spec = object.__getattribute__(module, "__dict__").get("__spec__")
        except Exception:
            continue
        origin = getattr(spec, "origin", None)
        if name in had or type(getattr(spec, "loader", None)) is not \
                importlib.machinery.SourceFileLoader or not isinstance(origin, str):
            continue
        base = os.path.basename(origin)
        if base == "conftest.py" or base.startswith("test_") or base.endswith("_test.py"):
            continue  # what pytest collects: its lines show in its report
        if origin.endswith(".py") and origin.startswith(here) \
                and not os.path.normpath(origin).startswith(where) \
                and origin not in OPENED and os.path.basename(origin) not in OPENED:
            sources.add(origin)
    found = {}
    inspected = list(INSPECTED)
    while inspected:
        code = inspected.pop()
        codes.append(code)
        inspected.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    for code in {id(c): c for c in codes}.values():
        if code.co_filename in sources:
            found.setdefault(code.co_filename, []).append(
                [qualname(code), code.co_firstlineno, check(code)])
    return found

def write_report(memfd, rep):
    try:
        data = json.dumps(rep).encode()
        while data:
            data = data[os.write(memfd, data):]
    except BaseException:
        pass

def become(job, retarget, memfd, preloaded, had, where, executed):
    import runpy, tempfile
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(job["log"], os.O_WRONLY | os.O_APPEND)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.environ.clear()
    os.environ.update(job["env"])
    os.chdir(job["cwd"])
    if retarget(os.fsencode(job["trace_dir"])) != 0:
        os.write(2, b"memotest: the warm worker could not redirect the trace\n")
        os._exit(70)
    tempfile.tempdir = None
    importlib.invalidate_caches()
    for key in [k for k, v in sys.path_importer_cache.items() if v is None]:
        del sys.path_importer_cache[key]  # a folder missing then may be there now
    sys.path[0] = os.getcwd()
    sys.argv = [job["module"], *job["args"]]
    if memfd >= 0:
        note_marks()
    if memfd < 0 or not job.get("code"):
        executed = None
    listings = memfd >= 0 and FILL and job.get("listings")
    rep = {"args": job["args"]}
    at_end = executed is not None or listings
    if at_end:
        # Written at exit, after the exit handlers the run registered and the threads
        # it left to be joined, which may run the project's code (or list folders) too.
        import atexit
        def at_exit():
            if executed is not None:
                rep["code"] = code_report(executed, had, where)
            if listings:
                rep["listings"] = listing_report(absolute(job["cwd"]), where)
                rep["sections"] = section_report()
            write_report(memfd, rep)
        atexit.register(at_exit)
    if executed is not None:
        watch_opens()
        executed.start()
    main = getattr(runpy, "_run_module_as_main", None)
    try:
        if main is not None:
            main(job["module"], alter_argv=True)
        else:
            runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
    finally:
        if memfd >= 0:
            try:
                rep.update(report(preloaded, had, where))
            except BaseException:
                pass
            if not at_end:
                write_report(memfd, rep)

become(*serve())
"""


#: The worker runs codemap.py's, listings.py's and sections.py's functions too: a run
#: reports the code it executed, what it looked for in the folders it listed, and the
#: ``pyproject.toml`` files only pytest read.
WORKER_PRELUDE = (
    Path(codemap.__file__).read_text(encoding="utf-8")
    + Path(listings.__file__).read_text(encoding="utf-8")
    + Path(sections.__file__).read_text(encoding="utf-8")
    + f"\nRAN_HYPOTHESIS = {RAN_HYPOTHESIS!r}\n"
)

#: The folder of the preload's markers (looked up, never there): see ``_project_reads``.
PRELOAD_MARK = "/.memotest-preload/"


def _project_reads(
    events: list[Event], cwd: str, roots: list[str]
) -> tuple[list[Event], list[tuple[str, str]]]:
    """The worker's events without the preload's markers, and the preloaded modules whose
    import looked at the project's files (anything under ``cwd`` but ``cwd`` itself and
    the interpreter's own folders, ``roots``): preloaded, such a module would make every
    run depend on that file (``hacking`` reads ``tox.ini`` when imported). The shim logs
    a path once, so only the first module to look at a file is named."""
    kept: list[Event] = []
    refused: dict[str, str] = {}
    current = ""
    inside = cwd.rstrip("/") + "/"
    for ev in events:
        path = ev.fields[0] if ev.fields else ""
        if ev.op == "M" and path.startswith(PRELOAD_MARK):
            current = path[len(PRELOAD_MARK) :]
            continue
        kept.append(ev)
        if (
            current
            and current not in refused
            and ev.op in "RSMLWND"
            and path.startswith(inside)
            and not (path + "/").startswith(tuple(roots))
        ):
            refused[current] = f"its import looked at {path}"
    return kept, list(refused.items())


class WarmUnavailable(Exception):
    """The worker cannot run this one: run it fresh."""


@dataclass(frozen=True)
class WarmSpec:
    """What makes two runs able to share a worker (whatever module each then runs: the
    collection and the targets share one)."""

    python: str
    modules: tuple[str, ...]
    cwd: str
    env: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, argv: list[str], warm: tuple[str, ...], cwd: str, env: dict[str, str]):
        """The spec of a run, or None when ``argv`` is not ``PYTHON -m MODULE ...``."""
        if len(argv) < 3 or argv[1] != "-m" or not os.path.isabs(argv[0]):
            return None
        kept = frozenset((k, v) for k, v in env.items() if k not in PER_RUN_ENV)
        return cls(argv[0], tuple(warm), cwd, kept)


#: What a directory the worker looked up but did not list is (``_sig``).
A_DIR = "dir"


def _sig(path: str, listed: bool = True) -> StatSig | str | None:
    """What a path is now: the file it leads to (a symbolic link's own change, to another
    file, shows as another inode), or None if it leads nowhere. A directory that was not
    listed is only a directory (``A_DIR``), as validation has it (``Kind.DIR``): the
    folders above the interpreter (``/tmp``, a home folder) change all the time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not listed and stat.S_ISDIR(st.st_mode):
        return A_DIR
    return StatSig.of(st)


class _Channel:
    """JSON lines from a pipe, with a timeout."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.fd = stream.fileno()
        self.buf = b""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message; None at end of file; TimeoutError after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


class Worker:
    """One warm process. It forks any number of runs at once (one per job slot); a
    thread reads its answers: the pid of each run it forked, and how each run ended."""

    def __init__(
        self,
        spec: WarmSpec,
        work_root: str | None = None,
        preload: tuple[str, ...] = (),
        code_level: bool = False,
        whole: frozenset[str] = frozenset(),
    ) -> None:
        from memotest.tracer.run import TracedRun  # run.py imports this module

        self.spec = spec
        #: Modules imported after ``spec.modules`` (``preload.py``); ``refused`` names
        #: those whose import warned, printed, started a thread or read the project's
        #: files, and why.
        self.preload = preload
        #: Whether its runs report the code they executed (``codemap.py``), but those
        #: whose arguments (JSON) are in ``whole`` (they ran Hypothesis: ``preload.py``).
        self.code_level = code_level
        self.whole = whole
        self.refused: list[tuple[str, str]] = []
        #: Every module the preload imported (its dependencies too).
        self.preloaded: frozenset[str] = frozenset()
        self.dir = tempfile.mkdtemp(prefix="memotest-worker-", dir=work_root)
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        self.err_path = os.path.join(self.dir, "stderr")
        self._err = open(self.err_path, "wb")  # noqa: SIM115 - closed by close()
        config = {
            "modules": spec.modules,
            "preload": preload,
            "mark": PRELOAD_MARK,
            "shim": shim.shim_path(),
            "executed": extension_path() if code_level else None,
            "tag": codemap.cache_tag(),
        }
        self.run = TracedRun(
            [
                spec.python,
                "-c",
                WORKER_PRELUDE + WORKER_SOURCE,
                json.dumps(config),
                *(["listings"] if code_level else []),
            ],
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
        #: The folders of the project only its imports listed: what they looked for there,
        #: and what of it they saw (``listings.py``).
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
        chan = _Channel(proc.stdout)
        try:
            msg = chan.read(WARMUP_TIMEOUT)
        except TimeoutError:
            msg = None
        self.run.watcher.stop()  # from now on the worker itself does nothing to trace
        if not msg or not msg.get("ready"):
            errors = "; ".join(msg.get("errors", [])) if msg else ""
            refused = msg.get("refused") if msg else None
            if not errors and isinstance(refused, list) and len(refused) == 2:
                self.refused = [(str(refused[0]), str(refused[1]))]
                errors = f"preloading {refused[0]}: {refused[1]}"
            self.why = errors or self._stderr_tail() or "the worker did not start"
            return False
        events, damage = read_log(self.run.log_path)
        events, self.refused = _project_reads(events, self.spec.cwd, msg.get("roots") or [])
        self.preloaded = frozenset(msg.get("preloaded") or ())
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
            seen=list(self.run.watcher.seen.values()),
            leftovers=[],
            shim=self.run.lib,
            trace_dir=self.run.dir,
        )
        if not trace.complete:
            self.why = "its start-up was not traced completely"
            return False
        self.events = events
        paths = trace.reads | trace.stats | trace.missing | trace.listed | trace.loaded
        paths |= trace.execs
        self._listed = frozenset(trace.listed)
        self.snapshot = {p: _sig(p, p in self._listed) for p in sorted(paths)}
        views = msg.get("views") or {}
        self._views = {
            p: (frozenset(views[p][0]), frozenset(views[p][1]))
            for p in self._listed
            if p in views and p not in trace.listed_elsewhere
        }
        for p, sig in self.snapshot.items():
            if isinstance(sig, StatSig) and sig.touched_since(started_ns):
                if p in self._views and self._view_holds(p):
                    continue  # what changed is nothing its imports looked for
                self.why = CHANGED_WHILE_STARTING
                return False
        self._reader = threading.Thread(
            target=self._read, args=(chan,), name="memotest-warm", daemon=True
        )
        self._reader.start()
        self.usable = True
        return True

    def changed(self) -> str | None:
        """The first path the worker observed while starting that is no longer as it was.
        A folder of the project only its imports listed holds while the entries they looked
        for are as the worker saw them (``listings.py``)."""
        listed = self._listed
        for p, sig in self.snapshot.items():
            now = _sig(p, p in listed)
            if now != sig:
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
        **_: object,
    ) -> RemoteProcess:
        """Forks a run of ``argv`` (``PYTHON -m MODULE ARGS``); the Popen of a TracedRun.
        Raises :class:`WarmUnavailable` when the worker cannot take it."""
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

    def _read(self, chan: _Channel) -> None:
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
            for answer in waiting:
                answer.put(None)
            for run in lost:
                run.lose()
            return

    def _stderr_tail(self) -> str:
        try:
            with open(self.err_path, "rb") as f:
                return f.read()[-300:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

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
        #: The worker's pid and trace folder, for the run's process watcher.
        self.owner = (worker.run.pid, worker.run.dir)
        self.preloaded = worker.preloaded
        #: What the run reported at its end (``preload.py``): the ``modules`` it imported,
        #: the names pytest ``marked`` for rewriting, the preloaded packages its
        #: ``sys.path`` would have found elsewhere (``shadowed``), the ``code`` it executed
        #: (``codemap.py``; or why its files stay whole); None if nothing.
        self.report: dict[str, Any] | None = None
        self._done = threading.Event()

    def ended(self, status: int, report: dict[str, Any] | None = None) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        self.report = report
        self._done.set()

    @property
    def tainted(self) -> list[str]:
        """Modules the worker preloaded that the run's pytest wanted to rewrite (a warning,
        asserts not rewritten), or that the run's ``sys.path`` would have found elsewhere
        (a module of the project by the same name): its result is not what a fresh run's
        would be."""
        report = self.report or {}
        marks = {str(m) for m in report.get("marked") or ()}
        rewritten = sorted(n for n in self.preloaded if marks and marked(n, marks))
        return [*rewritten, *map(str, report.get("shadowed") or ())]

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

    def __init__(self, work_root: str | None = None) -> None:
        self.work_root = work_root
        self.book = PreloadBook()
        #: Whether workers preload what earlier runs imported (off: ``pytest`` only).
        self.preload = True
        #: Whether runs report the code they executed (``codemap.py``; off: files whole).
        self.code_level = True
        self._workers: dict[WarmSpec, Worker] = {}
        self._retired: list[Worker] = []
        self._starts: dict[WarmSpec, int] = {}
        self._replaced: dict[WarmSpec, int] = {}
        self._starting: dict[WarmSpec, threading.Lock] = {}
        self._lock = threading.Lock()
        #: Why a worker was not used or was replaced, with how many times (``build -v``).
        self.events: dict[str, int] = {}

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
            for attempt in range(self.REFUSALS + 1):
                # The last attempt preloads nothing: refusals never cost the worker.
                preload = self.preload_for(spec) if attempt < self.REFUSALS else ()
                if self.code_level and extension_path() is None:
                    self.note("Python files are whole: memotest/_executed is not built")
                whole = self.book.whole_for(spec.cwd, spec.python)
                worker = Worker(spec, self.work_root, preload, self.code_level, whole)
                ok = worker.start()
                if ok or not worker.refused:
                    break
                self.book.refuse(spec.cwd, spec.python, [name for name, _ in worker.refused])
                for name, why in worker.refused:
                    self.note(f"a warm worker left out {name} ({why})")
                worker.close()
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

    def preload_for(self, spec: WarmSpec) -> tuple[str, ...]:
        """What a new worker for ``spec`` preloads (nothing with preloading off)."""
        if not self.preload or self._replaced.get(spec, 0) >= self.REPLACEMENTS:
            return ()
        return self.book.modules_for(spec.cwd, spec.python, spec.modules)

    def learn(self, spec: WarmSpec, run: RemoteProcess) -> None:
        """Takes what a forked run reported for the next workers of its spec."""
        if run.report is not None:
            self.book.learn(spec.cwd, spec.python, run.report)

    def note(self, event: str) -> None:
        """Counts an event (``build -v``)."""
        with self._lock:
            self._note(event)

    def _note(self, event: str) -> None:
        """Counts an event; the caller holds ``_lock``."""
        self.events[event] = self.events.get(event, 0) + 1

    def close(self) -> None:
        with self._lock:
            workers = [*self._workers.values(), *self._retired]
            self._workers.clear()
            self._retired.clear()
        for w in workers:
            w.close()
        self.book.save()


_shared: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> WorkerPool:
    """The pool of this memotest process: pytest's collection and the build's targets
    share one worker. :func:`close_shared_pool` stops it (also at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = WorkerPool()
            atexit.register(close_shared_pool)
        return _shared


def close_shared_pool() -> None:
    global _shared
    with _shared_lock:
        pool, _shared = _shared, None
    if pool is not None:
        pool.close()
