"""What the worker tells of its own process: its threads, and the interpreter's folders."""

import os
import sys


def threads():
    """How many threads the process has (Python's and any other)."""
    import threading

    return max(threading.active_count(), len(os.listdir("/proc/self/task")))


def roots():
    """The interpreter's own folders: a module found there is not the project's. Its
    prefixes too (a venv inside the project), but not one the project is in (a system
    Python in /usr, a project in /usr/src/app)."""
    import contextlib
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    here = os.path.join(os.getcwd(), "")
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        if not here.startswith(os.path.join(os.path.normpath(prefix), "")):
            found.add(prefix)
    with contextlib.suppress(Exception):
        found.update(site.getsitepackages())
    return tuple(sorted(os.path.normpath(p) + os.sep for p in found))
