"""How much of a per-file pytest run is start-up: fresh processes against forks of a warm one.

memotest runs one pytest process per test file (as RetestAll does), and each pays for
starting Python, importing pytest and loading its plugins before the file's first test.
This measures what forking a child per file from a process that has already imported
pytest and its plugins saves, without memotest or its tracer: the raw gain of memotest's
warm workers (``memotest/tracer/warm/``), which fork every ``--pytest`` target that way.

Run it with the interpreter of the tests, in the project's folder::

    .bench/venv-cliff/bin/python benchmarks/warm_fork.py cliff/tests/test_*.py

Prints the time of the files in fresh processes (``python -m pytest -q -p no:cacheprovider
FILE`` each, sequentially) and forked from a warm process (each child calls
``pytest.main`` with the same arguments) that imported pytest, as memotest's workers do,
then one that also imported the ``pytest11`` plugins (an upper bound: memotest cannot do
that, pytest would not rewrite their asserts), plus the one-off cost of warming up.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import subprocess
import sys
import time

ARGS = ["-q", "-p", "no:cacheprovider"]


def fresh(files: list[str]) -> float:
    t0 = time.monotonic()
    for f in files:
        subprocess.run(
            [sys.executable, "-m", "pytest", *ARGS, f],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    return time.monotonic() - t0


def warm_up(plugins: bool) -> float:
    """Imports pytest (what memotest's workers import), and with ``plugins`` the plugins
    of the ``pytest11`` entry points too (which memotest's workers do not: pytest must
    import them itself to rewrite their asserts)."""
    t0 = time.monotonic()
    import pytest  # noqa: F401

    if plugins:
        for ep in importlib.metadata.entry_points(group="pytest11"):
            # a plugin that fails to load fails in the children too
            with contextlib.suppress(Exception):
                ep.load()
    return time.monotonic() - t0


def forked(files: list[str]) -> float:
    import pytest

    t0 = time.monotonic()
    for f in files:
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os._exit(int(pytest.main([*ARGS, f])))
        os.waitpid(pid, 0)
    return time.monotonic() - t0


def main() -> int:
    files = sorted(sys.argv[1:])
    if not files:
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    cold = fresh(files)
    pre = warm_up(plugins=False)
    warm = forked(files)
    print(
        f"{len(files)} files: fresh processes {cold:.2f}s, forked from a process that "
        f"imported pytest {warm:.2f}s (+{pre:.2f}s once to warm up): {1 - warm / cold:.0%} less"
    )
    pre = warm_up(plugins=True)
    warmer = forked(files)
    print(
        f"  forked from a process that also imported the pytest11 plugins {warmer:.2f}s "
        f"(+{pre:.2f}s): {1 - warmer / cold:.0%} less"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
