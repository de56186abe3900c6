"""Errors that end a command with a one-line message instead of a traceback, and the test
hook that raises one of memotest's own failures on purpose (:func:`inject`)."""

from __future__ import annotations

import os


class UsageError(Exception):
    """A mistake of the user's (bad arguments, bad targets file): exit status 2."""

    exit_code = 2


class ConfigError(UsageError):
    """A targets file that cannot be used; the message names the file and line."""


#: The variable naming the stages that fail on purpose (tests only: :mod:`memotest.drive.faults`).
INJECT_VAR = "MEMOTEST_INJECT_FAULT"


class InjectedFault(RuntimeError):
    """The failure :func:`inject` raises."""


def inject(stage: str) -> None:
    """Raises :class:`InjectedFault` when ``MEMOTEST_INJECT_FAULT`` names ``stage``: the
    test hook that makes memotest's failure paths real (:mod:`memotest.drive.faults`)."""
    wanted = os.environ.get(INJECT_VAR)
    if wanted and stage in wanted.split(","):
        raise InjectedFault(f"fault injected at {stage!r} ({INJECT_VAR})")
