"""The :class:`Store`: an open ``.memotest/``, the one object the rest of memotest holds.

It owns the database connection (:mod:`.schema`), the build lock (:mod:`.lock`), the
fingerprint tables and their caches (:mod:`.fingerprints`), the blobs (:mod:`.blobs`) and
the roots paths are stored under (:mod:`.portable`), and orders their writes for crash
safety: a record's blobs are stored *before* the transaction that writes its row, its
fingerprint rows and its input array: a process killed at any instant leaves each record
either absent or complete.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memotest.errors import inject
from memotest.model import Input
from memotest.store import damage, records, schema
from memotest.store.blobs import CAS_DIR, LocalBlobStore
from memotest.store.errors import CorruptBlob, StoreDamaged, StoreError
from memotest.store.fingerprints import FingerprintTable, storable_updates
from memotest.store.housekeeping import Housekeeping
from memotest.store.lock import LOCK_FILE, acquire_lock, release_lock
from memotest.store.outputs import restore_file, restore_outputs
from memotest.store.portable import loaded, stored
from memotest.store.records import Record
from memotest.store.unions import Unions
from memotest.world.observable import listing_digest, split_listing
from memotest.world.roots import Roots

#: The folder, beside the targets file, that holds the store.
STORE_DIR = ".memotest"

T = TypeVar("T")


class Store(Unions, Housekeeping):
    """An open ``.memotest/`` store (use :meth:`open`; a context manager). Thread-safe: one
    connection guarded by a lock, so a scheduler's threads may ``put`` while others read."""

    def __init__(self, root: Path, conn: sqlite3.Connection | None, lock_fd: int | None) -> None:
        self.root = root
        self.dir = root / STORE_DIR
        self.db_path = self.dir / schema.DB_FILE
        self.cas_dir = self.dir / CAS_DIR
        self._conn: sqlite3.Connection | None = conn
        self._lock_fd = lock_fd
        self._mutex = threading.RLock()
        self._blobs = LocalBlobStore(self.cas_dir)
        self._fps = FingerprintTable(self._db, self._mutex, Roots(root), self._guarded)
        self._said_blob = False  # a damaged blob was reported (once per store handle)
        self._listings_saved: set[str] = set()  # by this handle (_save_listing_names)
        self._puts = 0  # records written through this handle, for gc_if_due()
        self._pending_unions: list[dict[str, Any]] = []  # merged, not yet kept (.unions)

    # -- opening and closing --------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: Path | str,
        *,
        lock: bool = True,
        lock_timeout: float = 30.0,
        roots: Roots | None = None,
    ) -> Store:
        """Open (creating it if needed) the store in ``root/.memotest``.

        ``root`` is the folder of the targets file, ``roots`` what paths are stored under
        (:mod:`.portable`; default: ``root``). With ``lock`` (builds), take the exclusive
        build lock, waiting up to ``lock_timeout`` seconds, then raise :class:`~.StoreLocked`;
        a damaged part is set aside and made anew (:mod:`.damage`). Without it (explain,
        show, list) the store is read-only, and a damaged one raises :class:`~.StoreDamaged`."""
        root = Path(root).absolute()
        d = root / STORE_DIR
        why = damage.not_a_folder(d)
        if why is not None:
            if not lock:
                raise StoreDamaged(f"{d}: {why}")
            damage.set_aside_store(d, why)
        d.mkdir(parents=True, exist_ok=True)
        if lock:
            damage.clear_lock(d / LOCK_FILE)
        lock_fd = acquire_lock(d / LOCK_FILE, lock_timeout) if lock else None
        try:
            why = damage.not_a_folder(d / CAS_DIR)
            if why is not None:
                if not lock:
                    raise StoreDamaged(f"{d}: {why}")
                damage.set_aside(d, [d / CAS_DIR], why)
            (d / CAS_DIR).mkdir(exist_ok=True)
            store = cls(root, None, lock_fd)
            store._fps.roots = roots or store._fps.roots
            store._guarded("opening the database", store._connect)
        except BaseException:
            if lock_fd is not None:
                release_lock(lock_fd)
            raise
        return store

    def _connect(self) -> None:
        """Connect to the database (made if absent) and check its format."""
        conn = schema.connect(self.db_path, timeout=30.0)
        try:
            schema.init_schema(conn, writable=self.locked, db_path=self.db_path)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _guarded(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, which uses the database; when it meets damage
        (:func:`~memotest.store.damage.is_damage`), a store with the lock sets the
        database aside, starts a fresh one and calls ``fn`` again, and a read-only one
        raises :class:`~memotest.store.StoreDamaged`. Another error of SQLite (a full
        disk) is a :class:`~memotest.store.StoreError` saying ``what`` failed."""
        with self._mutex:
            try:
                return fn()
            except Exception as exc:
                if not damage.is_store_error(exc) or isinstance(exc, StoreDamaged):
                    raise
                why = f"{self.db_path.name}: {damage.describe(exc)}"
                if not damage.is_damage(exc):
                    raise StoreError(f"{what}: {why}") from None
                if not self.locked:
                    raise StoreDamaged(f"{self.db_path}: {damage.describe(exc)}") from None
                self._set_db_aside(why)
            try:
                return fn()
            except Exception as exc:
                if damage.is_store_error(exc) and not isinstance(exc, StoreError):
                    raise StoreError(f"{what}: {damage.describe(exc)}") from None
                raise

    def _set_db_aside(self, why: str) -> None:
        """The database is damaged: move it (with its WAL and shared memory, which belong
        to it) aside and connect to a fresh one."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        self._fps.forget()
        parts = [self.db_path.with_name(self.db_path.name + x) for x in ("", "-wal", "-shm")]
        damage.set_aside(self.dir, parts, why)
        self._connect()

    @property
    def locked(self) -> bool:
        """Whether this store holds the build lock (and may be written)."""
        return self._lock_fd is not None

    def close(self) -> None:
        """Close the database and release the lock."""
        with self._mutex:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    if self.locked:
                        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._conn.close()
                self._conn = None
            if self._lock_fd is not None:
                release_lock(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is closed")
        return self._conn

    def _require_lock(self) -> None:
        if not self.locked:
            raise StoreError("the store was opened read-only (lock=False)")

    # -- records ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of all stored records, sorted."""
        return self._guarded("reading the records", lambda: records.names(self._db()))

    def get(self, name: str) -> Record | None:
        """The record of ``name`` with its inputs materialized, or None."""
        rec = self.records([name]).get(name)
        if rec is not None:
            rec.inputs = list(rec.inputs)
        return rec

    def records(self, names: Iterable[str] | None = None) -> dict[str, Record]:
        """The records of ``names`` (all when None) that exist, in one query.

        Their ``inputs`` are lazy :class:`~memotest.store.InputList` objects (fingerprint
        ids): cheap to load by the thousand, materialized only when iterated.
        """
        wanted = None if names is None else list(names)
        found = self._guarded(
            "reading the records",
            lambda: records.from_rows(records.select(self._db(), wanted), self._fps),
        )
        return loaded(found, self._fps.roots)

    @property
    def roots(self) -> Roots:
        """The roots its paths are stored under (:mod:`memotest.world.roots`)."""
        return self._fps.roots

    def variant_heads(self, names: Iterable[str]) -> dict[str, list[records.Head]]:
        """Every variant of ``names``, newest first, as :class:`~memotest.store.records.Head`
        (the columns that say whether it is a candidate), in one query."""
        wanted = list(names)
        return self._guarded("reading the records", lambda: records.heads(self._db(), wanted))

    def variants(self, ids: Iterable[int], *, lazy: bool = False) -> dict[int, Record]:
        """The variants ``ids`` that exist, by id, with lazy inputs (as :meth:`records`);
        with ``lazy``, their id arrays are decompressed when asked (:meth:`input_ids`)."""
        wanted = list(ids)

        def read() -> dict[int, Record]:
            rows = records.select_ids(self._db(), wanted)
            return {r.variant_id or 0: r for r in records.decode(rows, self._fps, lazy)}

        return loaded(self._guarded("reading the records", read), self._fps.roots)

    def put(self, record: Record) -> None:
        """Add ``record`` as a variant of its name, in one transaction (replacing the
        variant of the same key and inputs: :func:`memotest.store.records.insert`).

        The blobs it names (log, outputs) must already be in the CAS. Listing names carried
        by ``LISTING`` fingerprints are saved to the CAS first, for ``explain``.
        """
        self._require_lock()
        self._puts += 1
        for digest in records.named_blobs(
            record.log_digest, record.outputs, record.tests_digest, record.parts
        ):
            if not self.has_blob(digest):
                raise StoreError(f"record {record.name!r} names blob {digest} not in the store")
        self._save_listing_names(record.inputs)

        def put() -> None:
            with schema.transaction(self._db()) as conn:
                inject("record")  # a test's stand-in for a failure here
                interned = self._fps.intern(conn, record.inputs)
                rec = stored(record, self._fps.roots)
                records.insert(conn, rec, interned.ids, time.time_ns())
            self._fps.learn(interned)

        self._guarded(f"recording {record.name}", put)

    def _save_listing_names(self, inputs: Iterable[Input]) -> None:
        """Save the entry names an input carries (a listing's, ``Fingerprint.names``) under
        its digest, when they hash to it, so :meth:`listing_names` can give them back."""
        saved = self._listings_saved
        for inp in inputs:
            names = getattr(inp, "names", None)
            if names is not None and inp.digest not in saved:
                types = getattr(inp, "types", None)
                digest, blob = listing_digest(
                    (os.fsencode(n) for n in names), types, getattr(inp, "link", None)
                )
                if digest == inp.digest:
                    if not self.has_blob(digest):
                        self.put_blob(blob)
                    saved.add(digest)  # a listing many runs made: hashed and saved once

    def remove(self, name: str) -> bool:
        """Forget every variant of ``name``; True if there was one."""
        self._require_lock()

        def remove() -> bool:
            with schema.transaction(self._db()) as conn:
                return records.delete(conn, name)

        return self._guarded(f"forgetting {name}", remove)

    def get_meta(self, key: str) -> Any:
        """A JSON value kept in the store under ``key`` (None when absent)."""
        return self._guarded("reading the store", lambda: schema.get_meta(self._db(), key))

    def set_meta(self, key: str, value: Any) -> None:
        """Keeps a JSON value under ``key`` (needs the lock)."""
        self._require_lock()

        def set_meta() -> None:
            with schema.transaction(self._db()) as conn:
                schema.set_meta(conn, key, value)

        self._guarded("writing the store", set_meta)

    def clean(self) -> None:
        """Delete everything under ``.memotest/`` (but the lock this build holds), and
        start a fresh database."""
        self._require_lock()
        with self._mutex:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            self._conn = None
            damage.empty(self.dir)
            self.cas_dir.mkdir(exist_ok=True)
            self._fps.forget()
            self._guarded("opening the database", self._connect)

    @classmethod
    def wipe(cls, root: Path | str, *, lock_timeout: float = 30.0) -> None:
        """Delete the store of ``root``, whatever is there (``clean``: :func:`.damage.wipe`)."""
        damage.wipe(Path(root).absolute() / STORE_DIR, lock_timeout)

    # -- fingerprints -------------------------------------------------------------------

    def fingerprint_rows(self, ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """The ``fps`` rows of ``ids`` that exist, as tuples in :class:`~.FpRow` order.
        Cached for the store's life (and kept current by this store's own writes)."""
        return self._fps.rows(ids)

    def refresh(self, updates: Mapping[int, tuple[Sequence[int], int]]) -> int:
        """Store new ``(sig, verified_ns)`` for fingerprints that were re-hashed and held, in
        one transaction; returns the number of rows updated. No-op when empty."""
        updates = storable_updates(updates)
        if not updates:
            return 0
        self._require_lock()
        return self._guarded("refreshing fingerprints", lambda: self._fps.refresh(updates))

    def fp_ids_of_paths(self, paths: Iterable[str]) -> set[int]:
        """The ids of every stored fingerprint of any of ``paths`` (for finding, in one
        ``isdisjoint`` per record, the records that observed one of them)."""
        wanted = list(paths)
        return self._guarded("reading fingerprints", lambda: self._fps.ids_of_paths(wanted))

    # -- blobs --------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        """Where the blob of ``digest`` lives (whether or not it exists)."""
        return self._blobs.path(digest)

    def has_blob(self, digest: str) -> bool:
        """Whether the CAS holds the blob of ``digest``."""
        return self._blobs.has(digest)

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` in the CAS; returns its digest (xxh3-128 hex)."""
        return self._blobs.put(data)

    def put_file(self, path: str | os.PathLike[str]) -> str:
        """Store the content of the file at ``path`` in the CAS (streamed); returns its digest."""
        return self._blobs.put_file(path)

    def read_blob(self, digest: str) -> bytes:
        """The bytes stored under ``digest`` (verified); ``FileNotFoundError`` if absent,
        :class:`~memotest.store.CorruptBlob` if damaged (:meth:`_blob_damaged`)."""
        try:
            return self._blobs.read(digest)
        except CorruptBlob as exc:
            self._blob_damaged(digest, exc)
            raise

    def _blob_damaged(self, digest: str, exc: CorruptBlob) -> None:
        """A blob that does not hash to its name was met: with the lock, delete it (the
        next run that makes that content stores it anew) and say so, once per store."""
        if self.locked and digest:
            damage.discard_blob(self._blobs.path(digest), exc.what, say=not self._said_blob)
            self._said_blob = True

    def restore_outputs(self, outputs: dict[str, str], cwd: str) -> None:
        """Puts a record's declared outputs (``Record.outputs``) back under ``cwd``."""
        try:
            restore_outputs(self._blobs, outputs, cwd)
        except CorruptBlob as exc:
            self._blob_damaged(exc.digest, exc)
            raise

    def restore_file(
        self, digest: str, path: str | os.PathLike[str], executable: bool | None = None
    ) -> bool:
        """Write the blob ``digest`` to ``path`` atomically; False if it already had it."""
        try:
            return restore_file(self._blobs, digest, path, executable)
        except CorruptBlob as exc:
            self._blob_damaged(exc.digest, exc)
            raise

    def listing_names(self, digest: str) -> list[str] | None:
        """The entry names of a recorded ``LISTING`` fingerprint, if they were saved."""
        try:
            blob = self.read_blob(digest)
        except (OSError, ValueError, StoreError):
            return None
        return split_listing(blob)[0]
