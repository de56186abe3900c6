"""memotest's own failures after a command ran: the command's result stands, once.

The promise to a driver (``memotest build``, and :func:`memotest.memo.run_memoized` for
the tox, nox and make adapters): once a target's command has started, no exception of
memotest's (reading the trace, fingerprinting, storing, uploading, a plugin's hook that
reports the result) undoes it or makes anyone run it again. Each such place catches
*any* :class:`Exception`, keeps the command's own exit status and output as the result,
and marks it not cached with :func:`note`: ``not cached: memotest could not record:
TYPE: MESSAGE``. The user sees that one line; the traceback goes to
``.memotest/faults.log`` (:func:`log`), bounded in size. Only an exception *before* the
command started leaves a driver free to run it some other way (plainly, once).

:func:`inject` (:mod:`memotest.errors`) is the test hook that makes those paths real: with
``MEMOTEST_INJECT_FAULT=STAGE[,STAGE...]`` in memotest's environment, the named stage
raises :class:`InjectedFault` where it would really fail (``trace``: reading the trace
after the run; ``record``: storing the record; ``report``: the hook that reports a
result; ``before``: before the command starts). Nothing else reads the variable.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from pathlib import Path

#: Where the tracebacks go, under the project's store folder.
LOG_NAME = "faults.log"

#: The log is cut back to its last half past this size.
LOG_LIMIT = 256 * 1024


def one_line(exc: BaseException) -> str:
    """``TYPE: MESSAGE`` on one line (the first line of the message)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def log(root: Path | str | None, what: str, exc: BaseException) -> str | None:
    """Appends ``exc``'s traceback to ``ROOT/.memotest/faults.log``; returns the log's
    path, or None when it cannot be written (the one-line message still stands)."""
    if root is None:
        return None
    from memotest.store import STORE_DIR

    path = Path(root) / STORE_DIR / LOG_NAME
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if path.stat().st_size > LOG_LIMIT:
                data = path.read_bytes()[-LOG_LIMIT // 2 :]
                path.write_bytes(data)
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"--- {stamp} pid {os.getpid()}: {what}\n{text}")
        return str(path)
    return None


def note(root: Path | str | None, what: str, exc: BaseException) -> str:
    """The note of a result memotest could not record: ``not cached: memotest could not
    record: TYPE: MESSAGE``, the traceback logged (:func:`log`)."""
    where = log(root, what, exc)
    tail = f" (traceback in {where})" if where else ""
    return f"not cached: memotest could not record: {one_line(exc)}{tail}"
