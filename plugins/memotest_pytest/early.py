"""The configured worker of ``--pytest``'s targets, started while their collection runs.

A build that collects (``memotest build --pytest``, the collection stale) used to wait for
the collection, record it, and only then start (or promote) the worker that configured
pytest for the targets (``worker_side.prepare``): a second configuration of pytest, with
its plugins and the root conftests, one after the other on the way to the first target
(about 1 s of the 2.5-3 s before it on structlog, 2 cores). That worker's spec depends on
the collection only through pytest's rootdir and configuration file (the pinned ``-c``,
``--rootdir``) and the test files' folder. Both are known before the collection: pytest
finds its rootdir and configuration file from its arguments and the folders
(``determine_setup``, asked here of the pytest of memotest's own interpreter, which is the
tests' when the collection forks from a warm worker), and the folder is guessed from the
paths given (or the one entry of ``testpaths``).

So when the collection is about to run, the worker the targets would fork from, were that
guess right, is started in the background (``WorkerPool.start_early``). It is a worker like
any other of its spec: a target forks from it only if the spec the new collection gives it
is the same, with the same checks (a file it read changed since: replaced) and its
observations in every record that forks from it, as if it were started on the first
target's request. A wrong guess costs the CPU of a worker nobody uses, never a result.
Not when the collection is replayed (a no-op build starts no worker), nor with
``PYTEST_ADDOPTS`` set (it may name ``-c`` or ``--rootdir``).
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memotest.load.config import Settings
from memotest.model import Target
from memotest_pytest.pinned import _config_between, pinned_config

if TYPE_CHECKING:
    from memotest.tracer.warm.pool import WorkerPool


def prepare_args(run_args: tuple[str, ...], own: tuple[str, ...], rel: str) -> tuple[str, ...]:
    """``Target.prepare`` of the test file ``rel`` (relative to the rootdir) run with
    ``python -m pytest`` and ``run_args``, its configuration pinned by ``own``: the worker
    configures pytest as for a file of that folder (``worker_side.PLACEHOLDER``)."""
    from memotest_pytest import worker_side

    placeholder = os.path.join(os.path.dirname(rel), worker_side.PLACEHOLDER)
    return (run_args[1], *run_args[2:], *own, placeholder)


def guessed_target(
    python: str,
    modules: tuple[str, ...],
    run_args: tuple[str, ...],
    rootdir: Path,
    inipath: str | None,
    settings: bool,
    folder: Path,
) -> Target | None:
    """A target of a test file in ``folder`` as the loader makes it (``python -m pytest``
    and ``run_args``, forked from a worker that imported ``modules``) from a collection that
    finds ``rootdir``, ``inipath`` and ``settings``; None if it would fork from no worker
    that configured pytest."""
    if _config_between(folder, Path(inipath).parent if inipath else rootdir):
        return None
    own = pinned_config(inipath, rootdir, settings)
    rel = os.path.relpath(folder / "test_.py", rootdir)
    command = (python, *run_args, *own, rel)
    prepare = prepare_args(run_args, own, rel)
    return Target(f"pytest:{rel}", command, cwd=str(rootdir), warm=modules, prepare=prepare)


def guessed_setup(cwd: Path, paths: list[str]) -> tuple[Path, str | None, dict] | None:
    """pytest's rootdir, configuration file and its settings for ``paths`` given in
    ``cwd``, as this interpreter's pytest finds them; None if it cannot be asked."""
    if os.environ.get("PYTEST_ADDOPTS", "").strip():
        return None
    try:
        import inspect

        from _pytest.config.findpaths import determine_setup

        params = inspect.signature(determine_setup).parameters
        known = {
            "inifile": None,
            "override_ini": None,
            "args": [os.path.join(cwd, p) for p in paths],
            "rootdir_cmd_arg": None,
            "invocation_dir": Path(cwd),
            "config": None,
        }
        if any(p not in known for p in params) or (
            "invocation_dir" not in params and os.path.realpath(cwd) != os.getcwd()
        ):
            return None
        found = determine_setup(**{p: known[p] for p in params})
        rootdir, inipath, inicfg = found[0], found[1], found[2]
    except Exception:  # any pytest, any configuration: a guess only
        return None
    return Path(rootdir), (str(inipath) if inipath else None), dict(inicfg or {})


#: pytest's defaults for the settings the folder's guess reads.
PYTHON_FILES = ("test_*.py", "*_test.py")
NORECURSEDIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
#: Entries the guess looks at, at most (a checkout's root without ``testpaths``).
SCAN_MOST = 5000


def guessed_folder(cwd: Path, paths: list[str], rootdir: Path, inicfg: dict) -> Path | None:
    """The folder of the first test file the build will start (the targets' order is
    their paths'), as a guess: of the files named like test files (``python_files``)
    under the one path named (or the one entry of ``testpaths``, or the current folder),
    the first."""
    if len(paths) > 1:
        return None
    if paths:
        top = Path(os.path.abspath(os.path.join(cwd, paths[0])))
        if not top.is_dir():
            return top.parent
    else:
        entries = _words(inicfg.get("testpaths"))
        if len(entries) > 1 or (entries and not _same(cwd, rootdir)):
            return None
        top = rootdir / entries[0] if entries else Path(cwd)
    files = _words(inicfg.get("python_files")) or PYTHON_FILES
    skip = _words(inicfg.get("norecursedirs")) or NORECURSEDIRS
    seen, first = 0, None
    for folder, dirs, names in os.walk(top):
        seen += len(dirs) + len(names)
        if seen > SCAN_MOST:
            return None
        dirs[:] = [d for d in dirs if d != "__pycache__" and not _matches(d, skip)]
        for name in names:
            path = os.path.join(folder, name)
            if _matches(name, files) and (first is None or path < first):
                first = path
    return Path(first).parent if first is not None else None


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _words(value: object) -> list[str]:
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in value] if isinstance(value, list) else []


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def starter(
    cwd: Path,
    paths: list[str],
    python: str,
    pool: WorkerPool,
    settings: Settings,
    target_of: Callable[[Path, str | None, bool, Path], Target | None],
) -> Callable[[], None]:
    """What the collection calls when it is about to run: a thread that guesses the
    targets' worker (``target_of(rootdir, inipath, settings, folder)``: a target of that
    folder, as the loader would make it) and starts it (the module doc)."""

    def guess_and_start() -> None:
        from memotest.memo import start_worker_early

        setup = guessed_setup(cwd, paths)
        if setup is None:
            return
        rootdir, inipath, inicfg = setup
        folder = guessed_folder(cwd, paths, rootdir, inicfg)
        if folder is None:
            return
        target = target_of(rootdir, inipath, len(inicfg) > 0 or inipath is None, folder)
        if target is not None and target.prepare:
            start_worker_early(pool, target, settings, pool.config)

    def start() -> None:
        threading.Thread(target=guess_and_start, name="memotest-guess", daemon=True).start()

    return start
