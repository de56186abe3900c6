"""What goes wrong with a store: the exceptions its users catch."""

from __future__ import annotations

from pathlib import Path


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


class CorruptBlob(StoreError):
    """A CAS blob does not hash to its name (disk corruption or tampering)."""
