"""The :class:`~memotest.store.Store`'s housekeeping: variants marked used, the size bound
and the garbage collection (:mod:`memotest.store.gc`), and the store's size on disk.

A mixin of :class:`~memotest.store.Store`, kept apart so that each stays short; it uses the
store's connection, lock and tables.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from memotest.store import records, schema
from memotest.store.blobs import LocalBlobStore
from memotest.store.fingerprints import FingerprintTable
from memotest.store.gc import PUTS_KEY, GcStats, collect, is_due, over_bound
from memotest.store.unions import UNIONS_KEY

T = TypeVar("T")


class Housekeeping:
    """What :class:`~memotest.store.Store` does besides reading and writing records."""

    dir: Path
    _puts: int
    _mutex: threading.RLock
    _fps: FingerprintTable
    _blobs: LocalBlobStore

    def _require_lock(self) -> None:
        raise NotImplementedError

    def _guarded(self, what: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError

    def _db(self) -> sqlite3.Connection:
        raise NotImplementedError

    def get_meta(self, key: str) -> Any:
        raise NotImplementedError

    def set_meta(self, key: str, value: Any) -> None:
        raise NotImplementedError

    def take_unions(self) -> list[dict[str, Any]] | None:
        raise NotImplementedError

    def mark_used(self, ids: Iterable[int]) -> None:
        """The variants ``ids`` were replayed now: one transaction for a whole build (the
        size bound evicts the least recently used first), which also keeps the unions the
        build's plans merged (:mod:`memotest.store.unions`). No-op when empty."""
        wanted = list(ids)
        if not wanted:
            return
        self._require_lock()
        unions = self.take_unions()

        def mark() -> None:
            with schema.transaction(self._db()) as conn:
                records.mark_used(conn, wanted, time.time_ns())
                if unions is not None:
                    schema.set_meta(conn, UNIONS_KEY, unions)

        self._guarded("marking records used", mark)

    def gc_if_due(self, max_bytes: int | None = None) -> GcStats | None:
        """Collects garbage (:meth:`gc`) when it is due: enough records were written
        (:func:`memotest.store.gc.is_due`), or the store takes more than ``max_bytes``.
        Returns what was removed, or None when it was not due. Called at the end of a
        build, with the lock; a build that recorded nothing looks at nothing."""
        self._require_lock()
        if not self._puts:
            return None  # nothing replaced since the last look: a no-op build writes nothing
        puts = int(self.get_meta(PUTS_KEY) or 0) + self._puts
        self._puts = 0
        kept = self._guarded("reading the records", lambda: records.count(self._db()))
        over = max_bytes is not None and self._guarded(
            "measuring the store", lambda: over_bound(self._db(), self._blobs, max_bytes)
        )
        if not over and not is_due(puts, kept):
            self.set_meta(PUTS_KEY, puts)
            return None
        return self.gc(max_bytes)

    def gc(self, max_bytes: int | None = None) -> GcStats:
        """Evict the least recently used variants while the store takes more than
        ``max_bytes`` (when given), delete fingerprints, paths and blobs no record
        references, and stray temp files (and start counting the writes for
        :meth:`gc_if_due` again)."""
        self._require_lock()
        self._puts = 0
        self.set_meta(PUTS_KEY, 0)
        return self._guarded(
            "collecting garbage",
            lambda: collect(self._db, self._mutex, self._fps, self._blobs, max_bytes),
        )

    def size_bytes(self) -> int:
        """The bytes the store takes on disk (database, WAL and CAS)."""
        total = 0
        for dirpath, _dirs, files in os.walk(self.dir):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, f)).st_size
        return total
