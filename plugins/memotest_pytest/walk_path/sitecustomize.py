"""Starts memotest's listing watch at interpreter start-up, then runs the real ``sitecustomize``.

This folder is on ``PYTHONPATH`` for the plain pytest commands memotest memoizes (a
targets file's ``python -m pytest``, a tox env's, a nox session's: ``memotest_walk``,
beside this file). Python's ``site`` imports ``sitecustomize`` at start-up, after its
``.pth`` files and before the program: this module, unless a folder before this one on
``sys.path`` (a ``PYTHONPATH`` entry of the user's) has one.

When memotest watches this process (``MEMOTEST_LISTINGS`` names its report folder:
``memotest/tracer/listing_reports.py``), it installs the watch of what the import system
and other readers look for in the folders they list (``memotest/worker/listings.py``),
as ``memotest_walk`` would when pytest imports it, but before the program runs: a
``python -m pytest`` puts the current folder on ``sys.path`` only after this, so every
name any import looks for there is noted, and a new ``build/`` or ``dist/`` that no
import looked for re-runs nothing. The folders the import system listed before this ran
(``PYTHONPATH``'s, searched for the modules of the interpreter's start-up and of the
``.pth`` files, some of which failed: ``nt``, ``_winapi``) are held by every name an
import could take (``watch_listings(late=True)``). ``memotest_walk`` then finds the
watch started (:data:`STARTED` on the watch's package) and only adds its report at exit;
a watch that failed to start leaves no report (every folder the process listed stays
whole). The variable stays in the environment until ``memotest_walk`` takes it out.

Either way, it then runs the next ``sitecustomize`` on ``sys.path`` after this folder
(a venv's, Debian's ``/usr/lib/python3.X/sitecustomize.py``) as ``sitecustomize``: what
``import sitecustomize`` gives later is that module, and an error in it shows as Python
shows one; with none, the import fails as it would without this module. ``python -S``
(no ``site``) skips this file: ``memotest_walk`` then starts the watch late, as
``late=True`` says (``-I`` and ``-E`` drop ``PYTHONPATH``, and ``memotest_walk`` with it:
memotest loads it into no command with an interpreter option).

Only the standard library, Python 3.8 syntax: it runs in every Python that inherits the
``PYTHONPATH`` (the processes the tests start too, for which it only chains).
"""

import os
import sys

#: The variable naming the report folder (``memotest/tracer/listing_reports.py``).
REPORTS = "MEMOTEST_LISTINGS"
#: Set on the watch's package: True once the watch runs, False if starting it failed.
STARTED = "memotest_started_at_site"


def start_watch():
    """Starts the listing watch when memotest watches this process; never raises."""
    folder = os.environ.get(REPORTS)
    if not folder or "_memotest_worker" in sys.modules:
        return
    try:
        import json

        with open(os.path.join(folder, "watch.json"), "rb") as f:
            watch = json.loads(f.read())
        boot = {"__name__": "_memotest_boot"}
        exec(compile(watch["boot"][1], watch["boot"][0], "exec", dont_inherit=True), boot)
        package = boot["start_watch"](watch)  # late: after the .pth files' imports
        setattr(package, STARTED, True)
    except Exception:
        package = sys.modules.get("_memotest_worker")
        if package is not None:  # started half-way: no report (memotest_walk)
            setattr(package, STARTED, False)


def chain():
    """Runs the next ``sitecustomize`` on ``sys.path``, as ``sitecustomize``; raises the
    ``ModuleNotFoundError`` of a missing ``sitecustomize`` if there is none (``site`` takes it
    silently, and ``import sitecustomize`` raises it as without this module)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = None
    try:
        for at, entry in enumerate(sys.path):
            if isinstance(entry, str) and os.path.abspath(entry or os.curdir) == here:
                rest = sys.path[at + 1 :]
                break
        if rest is None:
            return
        external = sys.modules["_frozen_importlib_external"]
        spec = external.PathFinder.find_spec("sitecustomize", rest)
        module = None
        if spec is not None and spec.loader is not None:
            module = sys.modules["_frozen_importlib"].module_from_spec(spec)
    except Exception:
        return
    if module is None:
        raise ModuleNotFoundError("No module named 'sitecustomize'", name="sitecustomize")
    sys.modules["sitecustomize"] = module  # what the import of this module gives
    spec.loader.exec_module(module)


start_watch()
chain()
