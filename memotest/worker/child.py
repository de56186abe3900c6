"""What a forked child does to become the run it was asked for, and the run's report.

The child leaves the worker's session, takes the run's log as its stdout and stderr, its
environment and folder, tells the shim to write the trace to the run's own folder
(``memotest_shim_retarget``), and runs the module as ``python -m`` would. Its report
(what it imported, the code it executed, the folders it listed, the files only their
readers opened, what plugins add) goes to a memory file the worker reads when it ends: it
is written at exit, after the exit handlers the run registered and the threads it left to
be joined, which may run the project's code (or list folders) too.
"""

import os
import sys

from . import extensions
from .code_watch import EXECUTED, PHASING, code_report, watch_code
from .listings import FILL, absolute, listing_report, watch_forks
from .phases import phase_report
from .preload import imported_report
from .sections import section_report

#: ``(pid, exit status)`` of the run once it ended with a status, for :func:`exit_now`.
ENDED = []


def exit_now():
    """The last exit handler of every child (the worker registers it before anything):
    once the run ended with an exit status and every other exit handler ran (the run's,
    its report's, the modules'), ends the process as the C library's ``exit`` does (its
    own exit handlers, the shared objects' destructors, the C streams flushed) after what
    Python's finalization does first (the garbage collected, the standard streams
    flushed: 120 if stdout cannot be; the files the run left open flushed, as their
    teardown would), but without tearing down the modules: that touches every object the
    child shares with the worker, ~6,000 pages copied, 40-90 ms a run. What the modules
    still hold is not finalized (docs/limits.md, "What the pytest adapter assumes")."""
    if not ENDED or ENDED[0][0] != os.getpid():
        return
    import ctypes
    import gc

    status = ENDED[0][1]
    gc.collect()
    flush_left_open(gc.get_objects())
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except Exception:
            if stream is sys.stdout:
                status = 120
    # PyDLL: the interpreter's lock stays held, as after its finalization.
    ctypes.PyDLL(None).exit(status)


def flush_left_open(objects):
    """Flushes the buffered files among ``objects`` that are still open, the text ones
    first. The worker's own objects are frozen (``serve.py``), out of
    ``gc.get_objects()``: these are the run's."""
    import io
    from itertools import compress

    kinds = {io.TextIOWrapper: 0, io.BufferedWriter: 1, io.BufferedRandom: 1}
    files = list(compress(objects, map(kinds.__contains__, map(type, objects))))
    for file in sorted(files, key=lambda f: kinds[type(f)]):
        try:
            if not file.closed:
                file.flush()
        except Exception:
            pass


def write_report(memfd, report):
    """Writes the run's report (JSON, one line: a line break only at its end, written
    last, which tells the worker it is whole) to the memory file the worker reads at its
    end (``serve.read_report``)."""
    import json

    try:
        data = json.dumps(report).encode() + b"\n"
        while data:
            data = data[os.write(memfd, data) :]
    except BaseException:
        pass


def become(job, retarget, memfd, preloaded, had, where, executed, runner=None):
    """Turns this child into the run ``job`` asks for; its report goes to ``memfd``
    (none if negative). Returns when the run's module returns (or raises). ``runner``:
    what a plugin prepared in the worker (``extensions.py``), called instead of running
    the module; its exit status ends the run as ``python -m`` would."""
    import importlib
    import runpy
    import tempfile

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
    if runner is None:
        sys.path[0] = os.getcwd()  # the worker's own, and what the preparation put first
    sys.argv = [job["module"], *job["args"]]
    if memfd >= 0:
        for before_run in extensions.each("before_run"):
            before_run(job)
    if memfd < 0 or not job.get("code"):
        executed = None
    listings = memfd >= 0 and FILL and job.get("listings")
    if listings:
        watch_forks()  # a child it forks looks in the caches of what it listed
    report = {"args": job["args"]}
    at_end = executed is not None or listings
    if at_end:
        import atexit

        def at_exit():
            if executed is not None:
                report["code"] = code_report(executed, had, where)
                if PHASING:
                    report["phases"] = phase_report(where)
            if listings:
                report["listings"] = listing_report(absolute(job["cwd"]), where)
                report["sections"] = section_report()
            write_report(memfd, report)

        atexit.register(at_exit)
    if executed is not None:
        watch_code()
        if hasattr(executed, "restarts"):  # sys.monitoring: see Monitored.restarts
            executed.restarts = bool(job.get("phases"))
        executed.start()
        EXECUTED.append(executed)
        if job.get("phases"):  # the build may select tests: each phase's code too
            PHASING.append(True)
            executed.phase()
    main = getattr(runpy, "_run_module_as_main", None)
    try:
        if runner is not None:
            sys.exit(runner(job))
        elif main is not None:
            main(job["module"], alter_argv=True)
        else:
            runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
        ENDED.append((os.getpid(), 0))
    except SystemExit as exc:
        if exc.code is None or type(exc.code) is int:  # what Python exits with as it is
            ENDED.append((os.getpid(), exc.code or 0))
        raise
    finally:
        if memfd >= 0:
            try:
                report.update(imported_report(preloaded, had, where))
                for part in extensions.each("report"):
                    report.update(part())
            except BaseException:
                pass
            if not at_end:
                write_report(memfd, report)
