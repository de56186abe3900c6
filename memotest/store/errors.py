"""What goes wrong with a store: the exceptions its users catch."""

from __future__ import annotations

from pathlib import Path

from memotest.errors import UsageError


class StoreError(Exception):
    """The store can't be used as asked."""


class StoreLocked(StoreError):
    """Another build holds the store's lock."""

    def __init__(self, lock_path: Path, pid: int | None) -> None:
        self.lock_path = lock_path
        self.pid = pid
        who = f"pid {pid}" if pid else "pid unknown"
        super().__init__(
            f"another memotest build is running on this store ({who}); lock file {lock_path}"
        )


#: What a message about a damaged store tells the user to do.
FIX_HINT = "run `memotest clean` to remove it (a build sets it aside and starts a fresh one)"


class StoreDamaged(StoreError, UsageError):
    """The store is damaged and this user may not repair it (it has no build lock):
    the message says what is wrong and how to fix it; exit status 2, no traceback."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"the store is damaged ({what}): {FIX_HINT}")


class CorruptBlob(StoreDamaged):
    """A CAS blob does not hash to its name (disk corruption or tampering)."""

    def __init__(self, what: str, digest: str = "") -> None:
        self.digest = digest
        super().__init__(what)
