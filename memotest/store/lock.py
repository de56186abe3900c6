"""The build lock: one build writes a store at a time.

:meth:`memotest.store.Store.open` takes an exclusive ``flock`` on ``.memotest/lock`` and
writes its pid there (so the message of another build that waits can name it); the lock is
released when its descriptor is closed, which the kernel also does for a build that dies.
Read-only users (explain, show, list) take no lock and read through SQLite's WAL snapshots.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from memotest.store.errors import StoreLocked

#: The lock file's name in the store's folder.
LOCK_FILE = "lock"


def acquire_lock(path: Path, timeout: float) -> int:
    """Take the exclusive build lock, waiting up to ``timeout`` s; returns its fd.

    Raises :class:`~memotest.store.StoreLocked` when another build still holds it then."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + max(timeout, 0.0)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise StoreLocked(path, _read_pid(path))
            time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release_lock(fd: int) -> None:
    """Release the lock taken by :func:`acquire_lock` (closing its fd releases the flock)."""
    os.close(fd)


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
