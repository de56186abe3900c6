"""The configured worker of ``--pytest``'s targets, started while their collection runs.

A build that collects (``memotest build --pytest``, the collection stale) used to wait for
the collection, record it, and only then have the worker the targets fork from configure
pytest for them (``worker_side.prepare``, by promoting the collection's worker): a second
configuration of pytest, with its plugins and the root conftests, one after the other on
the way to the first target (0.5-1 s of the 2-2.5 s before it on structlog, 2 cores).

That worker's spec depends on the collection only through pytest's rootdir and
configuration file (pinned on the targets' command line) and the test files' folder
(the deepest one above them with a conftest: ``pinned.conftest_folder``). The
collection says the first two as soon as pytest is configured (``collect.CONFIGURED``, a
line written past pytest's capture once every plugin's ``pytest_configure`` ran), and the
folder is guessed from the names of the files under the paths pytest was given
(``python_files``, ``norecursedirs``): the folder of the first of them, which is the
first target the build starts. memotest follows the collection's output (:class:`Watch`)
and starts that worker then, in the background (``WorkerPool.start_early``), while pytest
collects.

It is a worker like any other of its spec: a target forks from it only if the spec the
new collection gives it is the same, with the same checks (a file it read changed since
it started: replaced) and its observations in every record forked from it, as if it had
been started on the first target's request. A wrong guess costs the CPU of a worker no
run uses, never a result. It starts after the collection's plugins are configured, so
that what a plugin creates then (pytest-benchmark's ``.benchmarks/``) is there before it
looks. Never when the collection is replayed (a no-op build starts no worker).
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memotest.load.config import Settings
from memotest.model import Target
from memotest_pytest.collect import CONFIGURED
from memotest_pytest.pinned import _config_between, conftest_folder, pinned_config

if TYPE_CHECKING:
    from memotest.tracer.warm.pool import WorkerPool

#: Entries the folder's guess looks at, at most (a checkout's root without ``testpaths``).
SCAN_MOST = 5000


def in_folder(folder: Path, rootdir: Path) -> str:
    """A test file's name in ``folder``, relative to ``rootdir``, for :func:`prepare_args`."""
    return os.path.relpath(folder / "test_.py", rootdir)


def prepare_args(run_args: tuple[str, ...], own: tuple[str, ...], rel: str) -> tuple[str, ...]:
    """``Target.prepare`` of the test file ``rel`` (relative to the rootdir) run with
    ``python -m pytest`` and ``run_args``, its configuration pinned by ``own``: the worker
    configures pytest as for a file of that folder (``worker_side.PLACEHOLDER``). The
    loader gives a file of the folder whose initial conftests the target's file gets
    (``pinned.conftest_folder``)."""
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
    top = Path(inipath).parent if inipath else rootdir
    if _config_between(folder, top):
        return None
    own = pinned_config(inipath, rootdir, settings)
    rel = os.path.relpath(folder / "test_.py", rootdir)
    command = (python, *run_args, *own, rel)
    prepare = prepare_args(run_args, own, in_folder(conftest_folder(folder, top), rootdir))
    return Target(f"pytest:{rel}", command, cwd=str(rootdir), warm=modules, prepare=prepare)


def guessed_folder(
    args: Sequence[str], python_files: Sequence[str], norecursedirs: Sequence[str]
) -> Path | None:
    """The folder of the first test file the build will start (the targets are in their
    paths' order), as a guess: of the files under the one path pytest was given that are
    named like test files, the first."""
    if len(args) != 1 or "::" in args[0]:
        return None
    top = Path(args[0])
    if not top.is_dir():
        return top.parent
    seen, first = 0, None
    for folder, dirs, names in os.walk(top):
        seen += len(dirs) + len(names)
        if seen > SCAN_MOST:
            return None
        dirs[:] = [d for d in dirs if d != "__pycache__" and not _matches(d, norecursedirs)]
        for name in names:
            path = os.path.join(folder, name)
            if _matches(name, python_files) and (first is None or path < first):
                first = path
    return Path(first).parent if first is not None else None


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


class Watch:
    """The collection's output as it comes (``run_memoized``'s ``tee``): calls
    ``configured`` with what the :data:`~memotest_pytest.collect.CONFIGURED` line says,
    once, in a thread of its own."""

    def __init__(self, configured: Callable[[dict], None]) -> None:
        self.configured = configured
        self.pending = b""
        self.done = False

    def write(self, chunk: bytes) -> int:
        if self.done:
            return len(chunk)
        self.pending += chunk
        mark = ("\n" + CONFIGURED).encode()
        at = self.pending.find(mark)
        if at < 0:  # keep what may be the start of the line
            self.pending = self.pending[-len(mark) :]
            return len(chunk)
        end = self.pending.find(b"\n", at + len(mark))
        if end < 0:  # the line is still coming
            self.pending = self.pending[at:]
            return len(chunk)
        self.done = True
        try:
            said = json.loads(self.pending[at + len(mark) : end])
        except ValueError:
            return len(chunk)
        self.pending = b""
        threading.Thread(
            target=self.configured, args=(said,), name="memotest-early", daemon=True
        ).start()
        return len(chunk)

    def flush(self) -> None:
        pass


def watch(
    pool: WorkerPool,
    settings: Settings,
    target_of: Callable[[Path, str | None, bool, Path], Target | None],
) -> Watch:
    """What follows the collection's output and starts the targets' worker once pytest is
    configured (module doc): ``target_of(rootdir, inipath, settings, folder)`` is a target
    of that folder as the loader would make it."""

    def configured(said: dict) -> None:
        from memotest.memo import start_worker_early

        try:
            folder = guessed_folder(said["args"], said["python_files"], said["norecursedirs"])
            if folder is None:
                return
            rootdir, inipath = Path(said["rootdir"]), said["inipath"]
            target = target_of(rootdir, inipath, bool(said["settings"]), folder)
        except (KeyError, TypeError, OSError):
            return
        if target is not None and target.prepare:
            start_worker_early(pool, target, settings, pool.config)

    return Watch(configured)
