"""``--pytest-split FILE=N``: one big test file as N targets, spread over the job slots.

A build runs one target per test file, so a file that holds most of a suite's tests (one
real suite keeps ~60,000 of them in two files) runs on one job slot while the others sit
idle, where ``pytest -n`` spreads tests. Split, the file is N targets::

    pytest:<file>@K/N     command: ... --memotest-part K/N <file>

each running the tests at positions K, K+N, K+2N... of the file's collection (round robin:
neighbouring parametrizations, often alike in cost, land on different parts;
``memotest_pytest.narrow``'s ``--memotest-part``), each its own record, run, replayed and
reported (per test too) on its own. The parts of a file share its inputs, so an edit of
the file re-runs every part; a part whose tests did not change replays.

Like ``pytest -n``, a part runs its tests without the others of its file before them: a
test that depends on state an earlier test of its file leaves (a module global, a
session fixture it changed) can fail in a part where the whole file passes. Split only
files whose tests stand alone (``docs/adapters/pytest.md``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from memotest.errors import UsageError
from memotest_pytest.collect import PART

#: How many parts a file may be split into.
MOST = 64


def parse(values: Sequence[str] | None, cwd: Path) -> dict[str, int]:
    """``FILE=N`` options as ``{absolute file: N}``."""
    out: dict[str, int] = {}
    for value in values or ():
        file, sep, count = value.rpartition("=")
        try:
            n = int(count)
        except ValueError:
            n = 0
        if not sep or not file or not 2 <= n <= MOST:
            raise UsageError(
                f"--pytest-split {value!r}: expected FILE=N, a test file and a number of "
                f"parts from 2 to {MOST}"
            )
        out[os.path.normpath(os.path.join(cwd, file))] = n
    return out


def check(splits: Mapping[str, int], files: Sequence[str], narrow: bool) -> None:
    """Every file to split is one pytest collected, and its interpreter can run parts."""
    collected = {os.path.normpath(f) for f in files}
    for file in sorted(splits):
        if file not in collected:
            raise UsageError(
                f"--pytest-split: {file} is not a test file pytest collected here "
                "(name it as you would to pytest, relative to the current folder)"
            )
    if splits and not narrow:
        raise UsageError(
            "--pytest-split: the tests' interpreter cannot import memotest_pytest, which "
            "runs a part of a file (install memotest there, or drop --pytest-split)"
        )


def parts(name: str, command: tuple[str, ...], n: int) -> dict[str, tuple[str, ...]]:
    """The N targets (name: command) of the file whose whole target is ``name`` with
    ``command``: the same command, running part K of N."""
    return {f"{name}@{k}/{n}": (*command, PART, f"{k}/{n}") for k in range(1, n + 1)}
