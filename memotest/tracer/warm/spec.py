"""What makes two runs able to share a warm worker, and the refusal to take a run."""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Variables set per run, not per worker: two runs that differ only in these share one.
#: Every variable memotest sets for one run alone belongs here (else each such run
#: starts a worker of its own).
PER_RUN_ENV = (
    "TMPDIR",
    "TMP",
    "TEMP",
    "MEMOTEST_TRACE_DIR",
    "MEMOTEST_SHIM",
    "MEMOTEST_SKIP_FILE",  # memotest/run/runner.py
    "MEMOTEST_TEST_RESULTS",  # memotest/run/testcases.py
    "MEMOTEST_SELECT",  # memotest/check/select.py: the tests a partial run runs
)


class WarmUnavailable(Exception):
    """The worker cannot run this one: run it fresh."""


@dataclass(frozen=True)
class WarmSpec:
    """What makes two runs able to share a worker (whatever module each then runs: a
    collection and the targets share one)."""

    python: str
    modules: tuple[str, ...]
    cwd: str
    env: frozenset[tuple[str, str]]
    #: ``MODULE ARG ...`` a plugin's worker-side module prepares once in the worker,
    #: before it forks (``Target.prepare``); empty: nothing.
    prepare: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        argv: list[str],
        warm: tuple[str, ...],
        cwd: str,
        env: dict[str, str],
        prepare: tuple[str, ...] = (),
    ):
        """The spec of a run, or None when ``argv`` is not ``PYTHON -m MODULE ...`` (or
        not of the module ``prepare`` names)."""
        if len(argv) < 3 or argv[1] != "-m" or not os.path.isabs(argv[0]):
            return None
        if prepare and prepare[0] != argv[2]:
            return None
        kept = frozenset((k, v) for k, v in env.items() if k not in PER_RUN_ENV)
        return cls(argv[0], tuple(warm), cwd, kept, tuple(prepare))
