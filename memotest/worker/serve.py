"""The worker's start-up, and the loop that forks each run.

``sys.argv[1]`` is the start-up config (JSON): the ``modules`` to import, the modules to
``preload`` and the ``mark`` of the preload, what a plugin ``prepare``s and the modules
to import after that (``preload_prepared``: under the hooks it installed, as the runs
would), the ``shim`` to call, the ``executed`` extension and the compiler ``tag`` it was
built for, the ``readers`` table (``sections.py``) and the ``extensions`` (plugins'
worker-side modules, by name).
``sys.argv[2]`` is ``listings`` when the runs report the folders they listed, the files
only their readers opened and the code they executed. Messages are JSON lines: requests
on fd 0, answers on fd 1: first whether the worker is ready, then for each request the
pid of the run it forked, and for each run that ended its status and report. A request
``{"promote": {"prepare": ..., "preload": ..., "preload_prepared": ...}}``, which memotest
sends only once every run the worker forked has ended, has it preload and prepare as
those keys of the start-up config say, and answer whether it is ready again: a worker
whose runs (a test runner's collection) are done becomes one that prepares its runs,
without starting Python and importing its modules again.
"""

import os
import sys

from . import child, extensions, listings, prepared_code, sections, untimed
from .interpreter import roots, threads
from .monitored import load_executed
from .preload import preload, remember_shadowed

PACKAGE = __name__.rpartition(".")[0]
#: ``memotest/tracer/warm/worker.py``'s ``PROMOTE_MARK``.
PROMOTE_MARK = "/.memotest-promote"
USED = ("atexit", "ctypes", "gc", "importlib.machinery", "json", "select", "threading")


def send(obj):
    """Writes one answer."""
    import json

    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


def read_report(memfd):
    """The report an ended run wrote to its memory file, as the JSON text it wrote (one
    line, its end included: ``child.write_report``), or ``b"null"`` when there is none or
    its writing did not end. Sent as it is: parsing and writing again the 60-140 KB of a
    run's report cost the worker, between a run's end and memotest's knowing it, ~5 ms."""
    if memfd < 0:
        return b"null"
    try:
        os.lseek(memfd, 0, 0)
        data = b""
        while True:
            chunk = os.read(memfd, 1 << 20)
            if not chunk:
                break
            data += chunk
    except OSError:
        return b"null"
    finally:
        os.close(memfd)
    # json.dumps writes no line break of its own: a report is whole when its only one is
    # the last byte, which the child writes last.
    if not data or data.find(b"\n") != len(data) - 1:
        return b"null"
    return data[:-1]


def send_ended(pid, status, report):
    """Writes the answer for a run that ended: its pid, exit status and report (JSON
    text, :func:`read_report`)."""
    data = b'{"pid": %d, "status": %d, "report": %s}\n' % (pid, status, report)
    while data:
        data = data[os.write(1, data) :]


def main():
    """Starts watching, imports, says whether it is ready, and serves; returns in each
    forked child what :func:`child.become` takes (the worker itself never returns)."""
    watching = sys.argv[2:3] == ["listings"]
    if watching:
        listings.watch_listings()  # before anything else lists a folder
    sys.path[0] = os.getcwd()  # where python -m puts the current folder
    import importlib

    # What the worker and its children use, imported now: what the worker reads after its
    # ready answer is in no trace, and what a child imports each run would read again.
    for name in USED:
        importlib.import_module(name)
    sys.modules["atexit"].register(child.exit_now)  # the first, so the last to run
    untimed.install()  # before the project's code binds os.path's probes (untimed.py)
    import ctypes
    import json

    cfg = json.loads(sys.argv[1])
    if watching:
        sections.watch_sections(cfg.get("readers") or [])
    for name in cfg.get("extensions") or []:
        extensions.register(sys.modules[PACKAGE + "." + name])
    errors = []
    for name in cfg["modules"]:
        try:
            importlib.import_module(name)
        except BaseException as exc:
            errors.append(f"import {name}: {exc!r}")
    retarget = ctypes.CDLL(cfg["shim"]).memotest_shim_retarget
    retarget.argtypes = [ctypes.c_char_p]
    retarget.restype = ctypes.c_int
    preloaded = frozenset()
    executed = None
    while True:
        preloaded, executed, runner, had, where = get_ready(cfg, errors, preloaded, executed)
        job, memfd = serve()
        if "promote" not in job:
            return job, retarget, memfd, preloaded, had, where, executed, runner
        # Asked to prepare runs now, its runs so far all ended (``promote``): it goes on
        # from its start-up as a worker started with that preparation would. What its
        # runs wrote in its trace before they retargeted theirs is before the mark.
        os.path.exists(PROMOTE_MARK)
        cfg = dict(cfg, **job["promote"])


def get_ready(cfg, errors, preloaded, executed):
    """Preloads, has a plugin prepare the runs (when ``cfg`` says what), says whether it
    is ready; ``(preloaded, executed, runner, had, where)``: every module preloaded so
    far, what notes the code a run executes, what each child runs instead of the module
    (None: the module), the modules a run does not report, the interpreter's folders."""
    import gc

    before = set(sys.modules)
    refused = None if errors else preload(cfg.get("preload") or [], cfg["mark"])
    preloaded = preloaded | frozenset(set(sys.modules) - before)
    if executed is None:
        executed = load_executed(cfg)
    runner = None
    noting = False  # the code the preparation runs (prepared_code.py)
    if cfg.get("prepare") and not errors and not refused:
        noting = prepared_code.start(executed)
        runner = prepare(cfg["prepare"], errors)
    after = frozenset()  # imported after the preparation, under the hooks it installed
    prepared = {}  # what the plugins report of the preparation (pytest: what it marked)
    if runner is not None and not errors and cfg.get("preload_prepared"):
        before = set(sys.modules)
        refused = preload(cfg["preload_prepared"], cfg["mark"])
        after = frozenset(set(sys.modules) - before)
    if runner is not None:
        for part in extensions.each("report"):
            prepared.update(part())
    where = roots()
    if noting:
        gc.collect()  # what the preparation left to finalize runs now, noted
        prepared_code.stop(executed, where)
    had = frozenset(sys.modules)  # a run reports what it imported beyond these
    if threads() != 1:
        errors.append("more than one thread after start-up")
    if not hasattr(os, "pidfd_open"):
        errors.append("os.pidfd_open is missing (Python 3.9+ on Linux 5.3+)")
    ready = not errors and not refused
    every = preloaded | after
    if ready:
        remember_shadowed(every)  # before the views: its looks are the worker's
    views = listings.finder_views(os.getcwd(), where) if listings.FILL else None
    send(
        {
            "ready": ready,
            "errors": errors,
            "refused": refused,
            "roots": where,
            "preloaded": sorted(preloaded),
            "prepared_preloaded": sorted(after),
            "prepared": prepared,
            "views": views,
        }
    )
    if errors or refused:
        os._exit(0)
    gc.collect()
    gc.freeze()  # what is shared with the children stays shared
    return every, executed, runner, had, where


def prepare(what, errors):
    """Has the plugin whose module ``what[0]`` is prepare its runs (``extensions.py``):
    the function each child calls instead of running the module, or None (no plugin
    prepares them: the children run the module; or one failed: ``errors`` says why).
    What the preparation prints goes to stderr, not to memotest; the requests stay on
    fd 0 (a test runner that captures its standard input puts ``/dev/null`` there)."""
    requests = os.dup(0)
    out = os.dup(1)
    os.dup2(2, 1)
    try:
        for prepare_run in extensions.each("prepare"):
            runner = prepare_run(what[0], list(what[1:]))
            if runner is not None:
                return runner
    except BaseException as exc:
        errors.append(f"preparing {what[0]}: {exc!r}")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out, 1)
        os.close(out)
        os.dup2(requests, 0)
        os.close(requests)
    return None


#: What came on fd 0 after the last request :func:`serve` took.
PENDING = [b""]


def serve():
    """Forks a child for each request until end of input and the last child's end;
    returns ``(job, memfd of its report)`` in each child, and ``(request, -1)`` in the
    worker for a request to ``promote`` it, once every child it forked has ended (memotest
    asks only then)."""
    import json
    import select

    children = {}  # pidfd: (pid, memfd of its report)
    buf, eof = PENDING[0], False
    promote = None
    while children or not (eof or promote):
        ready = [0] if b"\n" in buf and promote is None else []
        if not ready:
            ready = select.select([*children, *([] if eof or promote else [0])], [], [])[0]
        for fd in ready:
            if fd in children:
                pid, memfd = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                send_ended(pid, status, read_report(memfd))
                continue
            if b"\n" not in buf:
                chunk = os.read(0, 65536)
                eof = not chunk
                buf += chunk
            while b"\n" in buf and promote is None:
                line, buf = buf.split(b"\n", 1)
                job = json.loads(line)
                if "promote" in job:
                    promote = job
                    break
                memfd = os.memfd_create("memotest-report") if hasattr(os, "memfd_create") else -1
                pid = os.fork()
                if pid == 0:
                    prepared_code.forked()
                    for other, (_, their) in children.items():
                        os.close(other)
                        if their >= 0:
                            os.close(their)
                    return job, memfd
                children[os.pidfd_open(pid)] = (pid, memfd)
                send({"id": job["id"], "pid": pid})
    if promote is not None:
        PENDING[0] = buf
        return promote, -1
    os._exit(0)
