"""The record store: ``.memotest/`` beside the targets file.

Layout::

    .memotest/lock          flock'ed by the build that writes (holds its pid)
    .memotest/db.sqlite     records, interned paths and fingerprints (SQLite, WAL mode)
    .memotest/cas/ab/cd...  content-addressed blobs (logs, declared outputs, directory
                            listings), named by the xxh3-128 hex digest of their content
    .memotest/warm.json     not the store's: what the warm workers of the targets run in
                            this folder preload (``memotest/tracer/preload.py``)

Schema (``SCHEMA_VERSION``)::

    meta(key TEXT PRIMARY KEY, value TEXT)
    paths(id INTEGER PRIMARY KEY, path TEXT UNIQUE)
    fps(id INTEGER PRIMARY KEY, path_id, kind, digest, link, mtime_ns, size, ino, ctime_ns,
        verified_ns, UNIQUE(path_id, kind, digest))
    records(name TEXT PRIMARY KEY, recorder, def_hash, definition JSON, env_hash, env JSON,
            status, exit_code, duration, started_ns, finished_ns, cacheable,
            uncacheable_reason, n_inputs, inputs BLOB, writes BLOB, log_digest, outputs JSON,
            rewritten BLOB)

A record's ``inputs`` is a zlib-compressed array of ``fps.id`` (uint32, little endian,
sorted): records share their fingerprints, so 1,000 records of 2,000 inputs each cost a few
MB, and checking them all means validating each *distinct* fingerprint once and testing
each record's id array against the set of invalid ids (``set.isdisjoint`` at C speed).

Crash safety: a blob is written to a temporary file, fsync'ed and renamed into place, so it
is visible under its digest only when complete, and blobs are stored *before* the
transaction of the record that references them; a record (its row, its fingerprint rows and
its input array) is one transaction. A process killed at any instant leaves a store with
each record either absent or complete. One build writes at a time: :meth:`Store.open` takes
an exclusive ``flock`` on ``.memotest/lock``; read-only users (explain, show, list) open
with ``lock=False`` and read through WAL snapshots.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import sqlite3
import sys
import threading
import time
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, overload

import xxhash

from memotest.fingerprint import Fingerprint, is_racy, listing_digest
from memotest.model import Input, Kind, StatSig

__all__ = [
    "STATUSES",
    "STORE_DIR",
    "CorruptBlob",
    "FpRow",
    "GcStats",
    "InputList",
    "Record",
    "Store",
    "StoreError",
    "StoreLocked",
    "default_recorder",
]

#: The folder, beside the targets file, that holds the store.
STORE_DIR = ".memotest"
#: Bumped when the database layout changes; a store of another version is emptied.
SCHEMA_VERSION = 2
#: The statuses a record can have; only ``passed`` results are reused.
STATUSES = ("passed", "failed", "timeout", "error")

_CHUNK = 1 << 20
_BLOB_PLAIN = b"P"
_BLOB_ZLIB = b"Z"
_TMP_PREFIX = ".tmp-"
_DIGEST_RE = re.compile(r"[0-9a-f]{3,64}")


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


def default_recorder() -> str:
    """The recorder version of this memotest (:data:`memotest.keys.RECORDER`)."""
    from memotest.keys import RECORDER

    return RECORDER


@dataclass
class Record:
    """Everything stored about one target's last run.

    ``definition``/``env`` are what ``def_hash``/``env_hash`` were computed from (env values
    are hashes, None for unset: never values in clear), so ``explain`` can name what changed.
    ``status`` is one of :data:`STATUSES`. ``cacheable`` is False when the trace could not
    prove the result reusable; ``uncacheable_reason`` says why. ``inputs`` are the
    fingerprints that must all hold for a hit. ``writes`` are the paths the target wrote or
    deleted (sorted), for the scheduler's conflict checks; ``rewritten`` those of them it had
    read before (``validate.py``: the next run compares them with what they were before it).
    ``log_digest`` and ``outputs``
    (declared output path -> digest) name CAS blobs, which must be stored before the record.
    ``recorder`` is the version that made the record; another version's records are stale.
    """

    name: str
    status: str
    def_hash: str = ""
    definition: dict[str, Any] = field(default_factory=dict)
    env_hash: str = ""
    env: dict[str, str | None] = field(default_factory=dict)
    exit_code: int | None = None
    duration: float = 0.0
    started_ns: int = 0
    finished_ns: int = 0
    cacheable: bool = True
    uncacheable_reason: str | None = None
    inputs: Sequence[Input] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    log_digest: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    rewritten: list[str] = field(default_factory=list)
    recorder: str = field(default_factory=default_recorder)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, not {self.status!r}")


class FpRow(NamedTuple):
    """One row of the ``fps`` table with its path, in the order of the query.

    :meth:`Store.fingerprint_rows` returns plain tuples in this order (the planner's hot
    path indexes them); ``FpRow._make(row)`` gives the named view.
    """

    id: int
    path: str
    kind: str
    digest: str
    link: str | None
    mtime_ns: int | None
    size: int | None
    ino: int | None
    ctime_ns: int | None
    verified_ns: int

    @property
    def sig(self) -> StatSig | None:
        """The stat signature, or None when none was recorded."""
        if self.mtime_ns is None:
            return None
        return StatSig(self.mtime_ns, self.size or 0, self.ino or 0, self.ctime_ns or 0)

    def fingerprint(self) -> Fingerprint:
        """This row as a :class:`~memotest.fingerprint.Fingerprint`."""
        return Fingerprint(
            self.path, Kind(self.kind), self.digest, self.sig, self.verified_ns, self.link
        )


class InputList(Sequence[Fingerprint]):
    """A record's inputs as fingerprint ids, turned into fingerprints on first access.

    ``ids`` is the sorted ``array('I')`` of ``fps.id``; the planner works on it directly.
    Materializing needs the store that loaded it to still be open.
    """

    def __init__(self, ids: array[int], store: Store) -> None:
        self.ids = ids
        self._store: Store | None = store
        self._items: list[Fingerprint] | None = None

    def _materialize(self) -> list[Fingerprint]:
        if self._items is None:
            if self._store is None:  # pragma: no cover - defensive
                raise StoreError("the store these inputs came from is gone")
            rows = self._store.fingerprint_rows(self.ids)
            missing = [i for i in self.ids if i not in rows]
            if missing:
                raise StoreError(f"record references {len(missing)} missing fingerprint(s)")
            items = [FpRow._make(rows[i]).fingerprint() for i in self.ids]
            items.sort(key=lambda f: (f.path, f.kind.value, f.digest))
            self._items = items
            self._store = None
        return self._items

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> Fingerprint: ...
    @overload
    def __getitem__(self, i: slice) -> list[Fingerprint]: ...
    def __getitem__(self, i: int | slice) -> Fingerprint | list[Fingerprint]:
        return self._materialize()[i]

    def __iter__(self) -> Iterator[Fingerprint]:
        return iter(self._materialize())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"InputList({len(self.ids)} inputs)"


#: How a record's ``outputs`` mark an executable file: its value is the digest plus this.
EXECUTABLE_MARK = "+x"


def output_value(digest: str, executable: bool) -> str:
    """The value of an ``outputs`` entry: the blob's digest, marked when executable."""
    return digest + EXECUTABLE_MARK if executable else digest


def split_output(value: str) -> tuple[str, bool]:
    """An ``outputs`` value as (digest, executable)."""
    if value.endswith(EXECUTABLE_MARK):
        return value[: -len(EXECUTABLE_MARK)], True
    return value, False


#: :meth:`Store.gc_if_due` never collects before this many records were written.
GC_MIN_PUTS = 200


@dataclass
class GcStats:
    """What :meth:`Store.gc` removed."""

    fingerprints: int = 0
    paths: int = 0
    blobs: int = 0
    bytes: int = 0


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS paths(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS fps(
    id INTEGER PRIMARY KEY,
    path_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    digest TEXT NOT NULL,
    link TEXT,
    mtime_ns INTEGER,
    size INTEGER,
    ino INTEGER,
    ctime_ns INTEGER,
    verified_ns INTEGER NOT NULL DEFAULT 0,
    UNIQUE(path_id, kind, digest)
);
CREATE TABLE IF NOT EXISTS records(
    name TEXT PRIMARY KEY,
    recorder TEXT NOT NULL,
    def_hash TEXT NOT NULL,
    definition TEXT NOT NULL,
    env_hash TEXT NOT NULL,
    env TEXT NOT NULL,
    status TEXT NOT NULL,
    exit_code INTEGER,
    duration REAL NOT NULL,
    started_ns INTEGER NOT NULL,
    finished_ns INTEGER NOT NULL,
    cacheable INTEGER NOT NULL,
    uncacheable_reason TEXT,
    n_inputs INTEGER NOT NULL,
    inputs BLOB NOT NULL,
    writes BLOB NOT NULL,
    log_digest TEXT,
    outputs TEXT NOT NULL,
    rewritten BLOB NOT NULL
);
"""

_RECORD_COLUMNS = (
    "name, recorder, def_hash, definition, env_hash, env, status, exit_code, duration, "
    "started_ns, finished_ns, cacheable, uncacheable_reason, inputs, writes, log_digest, outputs, "
    "rewritten"
)

_FP_SELECT = (
    "SELECT f.id, p.path, f.kind, f.digest, f.link, f.mtime_ns, f.size, f.ino, f.ctime_ns, "
    "f.verified_ns FROM fps f JOIN paths p ON p.id = f.path_id"
)


def _encode_ids(ids: Iterable[int]) -> bytes:
    arr = array("I", sorted(set(ids)))
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return zlib.compress(arr.tobytes(), 6)


def _decode_ids(blob: bytes) -> array[int]:
    arr = array("I")
    arr.frombytes(zlib.decompress(blob))
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return arr


def _encode_paths(paths: Iterable[str]) -> bytes:
    return zlib.compress(b"\0".join(os.fsencode(p) for p in paths), 6)


def _decode_paths(blob: bytes) -> list[str]:
    raw = zlib.decompress(blob)
    return [os.fsdecode(p) for p in raw.split(b"\0")] if raw else []


def _compressible(data: bytes) -> bool:
    """Whether zlib is worth it, judged on a 64 KiB sample (logs yes, random or packed no)."""
    sample = data[: 1 << 16]
    return len(zlib.compress(sample, 1)) < len(sample) * 0.9


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class Store:
    """An open ``.memotest/`` store. Use :meth:`open`; a context manager.

    Thread-safe: one connection guarded by a lock, so a scheduler's worker threads may
    ``put`` results while others read.
    """

    def __init__(self, root: Path, conn: sqlite3.Connection, lock_fd: int | None) -> None:
        self.root = root
        self.dir = root / STORE_DIR
        self.db_path = self.dir / "db.sqlite"
        self.cas_dir = self.dir / "cas"
        self._cas = str(self.cas_dir)
        self._conn: sqlite3.Connection | None = conn
        self._lock_fd = lock_fd
        self._mutex = threading.RLock()
        # Write caches, valid while we hold the lock (nobody else writes): path -> id,
        # (path_id, kind, digest) -> (fp id, sig, verified_ns).
        self._path_ids: dict[str, int] | None = None
        self._fp_index: dict[tuple[int, str, str], tuple[int, tuple[int, ...] | None, int]]
        self._fp_index = {}
        # Read cache of fingerprint rows by id.
        self._rows: dict[int, tuple[Any, ...]] = {}
        self._rows_complete = False
        self._puts = 0  # records written through this handle, for gc_if_due()

    # -- opening and closing --------------------------------------------------------------

    @classmethod
    def open(cls, root: Path | str, *, lock: bool = True, lock_timeout: float = 30.0) -> Store:
        """Open (creating it if needed) the store in ``root/.memotest``.

        ``root`` is the folder of the targets file. With ``lock`` (builds), take the
        exclusive build lock, waiting up to ``lock_timeout`` seconds, then raise
        :class:`StoreLocked`. Without it (explain, show, list) the store is read-only.
        """
        root = Path(root).absolute()
        d = root / STORE_DIR
        (d / "cas").mkdir(parents=True, exist_ok=True)
        lock_fd = _acquire_lock(d / "lock", lock_timeout) if lock else None
        try:
            conn = sqlite3.connect(
                str(d / "db.sqlite"),
                isolation_level=None,
                timeout=max(lock_timeout, 5.0),
                check_same_thread=False,
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                store = cls(root, conn, lock_fd)
                store._init_schema()
            except BaseException:
                conn.close()
                raise
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        return store

    def _init_schema(self) -> None:
        conn = self._db()
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None and row[0] == str(SCHEMA_VERSION):
            return
        if row is not None and not self.locked:
            raise StoreError(
                f"{self.db_path} has store format {row[0]}, this memotest uses "
                f"{SCHEMA_VERSION}: run a build to upgrade it"
            )
        conn.execute("BEGIN IMMEDIATE")
        try:
            if row is not None:  # another format: it is a cache, start over
                for table in ("records", "fps", "paths", "meta"):
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

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
                os.close(self._lock_fd)  # releases the flock
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

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- records ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of all stored records, sorted."""
        with self._mutex:
            return [r[0] for r in self._db().execute("SELECT name FROM records ORDER BY name")]

    def get(self, name: str) -> Record | None:
        """The record of ``name`` with its inputs materialized, or None."""
        recs = self.records([name])
        rec = recs.get(name)
        if rec is not None:
            rec.inputs = list(rec.inputs)
        return rec

    def records(self, names: Iterable[str] | None = None) -> dict[str, Record]:
        """The records of ``names`` (all when None) that exist, in one query.

        Their ``inputs`` are lazy :class:`InputList` objects (fingerprint ids): cheap to
        load by the thousand, materialized only when iterated.
        """
        with self._mutex:
            conn = self._db()
            sql = f"SELECT {_RECORD_COLUMNS} FROM records"
            if names is None:
                rows = conn.execute(sql).fetchall()
            else:
                wanted = list(dict.fromkeys(names))
                if not wanted:
                    return {}
                rows = conn.execute(
                    sql + " WHERE name IN (SELECT value FROM json_each(?))", (json.dumps(wanted),)
                ).fetchall()
        out: dict[str, Record] = {}
        for r in rows:
            out[r[0]] = Record(
                name=r[0],
                recorder=r[1],
                def_hash=r[2],
                definition=json.loads(r[3]),
                env_hash=r[4],
                env=json.loads(r[5]),
                status=r[6],
                exit_code=r[7],
                duration=r[8],
                started_ns=r[9],
                finished_ns=r[10],
                cacheable=bool(r[11]),
                uncacheable_reason=r[12],
                inputs=InputList(_decode_ids(r[13]), self),
                writes=_decode_paths(r[14]),
                log_digest=r[15],
                outputs=json.loads(r[16]),
                rewritten=_decode_paths(r[17]),
            )
        return out

    def put(self, record: Record) -> None:
        """Store ``record`` (replacing the previous one of that name) in one transaction.

        The blobs it names (log, outputs) must already be in the CAS. Listing names carried
        by ``LISTING`` fingerprints are saved to the CAS first, for ``explain``.
        """
        self._require_lock()
        self._puts += 1
        outputs = [split_output(v)[0] for v in record.outputs.values()]
        for digest in [record.log_digest, *outputs]:
            if digest is not None and not self.has_blob(digest):
                raise StoreError(f"record {record.name!r} names blob {digest} not in the store")
        for inp in record.inputs:
            names = getattr(inp, "names", None)
            if Kind(inp.kind) is Kind.LISTING and names is not None:
                digest, blob = listing_digest(os.fsencode(n) for n in names)
                if digest == inp.digest and not self.has_blob(digest):
                    self.put_blob(blob)
        with self._mutex:
            self._load_write_caches()
            path_ids = self._path_ids
            assert path_ids is not None
            index = self._fp_index
            new_paths: dict[str, int] = {}
            new_fps: dict[tuple[int, str, str], tuple[int, tuple[int, ...] | None, int]] = {}
            ids: list[int] = []
            with self._transaction() as conn:
                for inp in record.inputs:
                    path = inp.path
                    pid = path_ids.get(path) or new_paths.get(path)
                    if pid is None:
                        pid = self._insert_path(conn, path)
                        new_paths[path] = pid
                    kind = Kind(inp.kind).value
                    key = (pid, kind, inp.digest)
                    sig_obj = getattr(inp, "sig", None)
                    sig = _storable(sig_obj)
                    verified = getattr(inp, "verified_ns", 0) if sig is not None else 0
                    link = getattr(inp, "link", None)
                    known = new_fps.get(key) or index.get(key)
                    if known is None:
                        cur = conn.execute(
                            "INSERT INTO fps(path_id, kind, digest, link, mtime_ns, size, ino, "
                            "ctime_ns, verified_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (pid, kind, inp.digest, link, *(sig or (None,) * 4), verified),
                        )
                        fid = cur.lastrowid
                        assert fid is not None
                        new_fps[key] = (fid, sig, verified)
                    else:
                        fid, old_sig, old_verified = known
                        if sig is not None and _better(sig, verified, old_sig, old_verified):
                            conn.execute(
                                "UPDATE fps SET mtime_ns = ?, size = ?, ino = ?, ctime_ns = ?, "
                                "verified_ns = ? WHERE id = ?",
                                (*sig, verified, fid),
                            )
                            new_fps[key] = (fid, sig, verified)
                    ids.append(fid)
                conn.execute(
                    f"INSERT OR REPLACE INTO records({_RECORD_COLUMNS}, n_inputs) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.name,
                        record.recorder,
                        record.def_hash,
                        json.dumps(record.definition, sort_keys=True, default=str),
                        record.env_hash,
                        json.dumps(record.env, sort_keys=True, default=str),
                        record.status,
                        record.exit_code,
                        float(record.duration),
                        int(record.started_ns),
                        int(record.finished_ns),
                        int(bool(record.cacheable)),
                        record.uncacheable_reason,
                        _encode_ids(ids),
                        _encode_paths(sorted(set(record.writes))),
                        record.log_digest,
                        json.dumps(record.outputs, sort_keys=True, default=str),
                        _encode_paths(sorted(set(record.rewritten))),
                        len(set(ids)),
                    ),
                )
            # Committed: now the caches may learn what the transaction made.
            path_ids.update(new_paths)
            index.update(new_fps)
            for fid, _sig, _v in new_fps.values():
                self._rows.pop(fid, None)
            if new_fps:
                self._rows_complete = False

    @staticmethod
    def _insert_path(conn: sqlite3.Connection, path: str) -> int:
        try:
            cur = conn.execute("INSERT INTO paths(path) VALUES (?)", (path,))
        except sqlite3.IntegrityError:  # pragma: no cover - the cache said it was new
            row = conn.execute("SELECT id FROM paths WHERE path = ?", (path,)).fetchone()
            return int(row[0])
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _load_write_caches(self) -> None:
        if self._path_ids is not None:
            return
        conn = self._db()
        self._path_ids = dict(conn.execute("SELECT path, id FROM paths"))
        index = self._fp_index
        index.clear()
        for fid, pid, kind, digest, m, s, i, c, v in conn.execute(
            "SELECT id, path_id, kind, digest, mtime_ns, size, ino, ctime_ns, verified_ns FROM fps"
        ):
            index[(pid, kind, digest)] = (fid, None if m is None else (m, s, i, c), v)

    def fp_ids_of_paths(self, paths: Iterable[str]) -> set[int]:
        """The ids of every stored fingerprint of any of ``paths`` (for finding, in one
        ``isdisjoint`` per record, the records that observed one of them)."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return set()
        with self._mutex:
            rows = self._db().execute(
                "SELECT f.id FROM fps f JOIN paths p ON p.id = f.path_id "
                "WHERE p.path IN (SELECT value FROM json_each(?))",
                (json.dumps(wanted),),
            )
            return {r[0] for r in rows}

    def get_meta(self, key: str) -> Any:
        """A JSON value kept in the store under ``key`` (None when absent)."""
        with self._mutex:
            row = self._db().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        """Keeps a JSON value under ``key`` (needs the lock)."""
        self._require_lock()
        with self._mutex, self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value))
            )

    def remove(self, name: str) -> bool:
        """Forget the record of ``name``; True if there was one."""
        self._require_lock()
        with self._mutex, self._transaction() as conn:
            cur = conn.execute("DELETE FROM records WHERE name = ?", (name,))
            return cur.rowcount > 0

    def clean(self) -> None:
        """Delete everything under ``.memotest/`` (but the lock this build holds)."""
        self._require_lock()
        with self._mutex:
            self._db().close()
            self._conn = None
            for entry in self.dir.iterdir():
                if entry.name == "lock":
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            self.cas_dir.mkdir(exist_ok=True)
            conn = sqlite3.connect(str(self.db_path), isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._conn = conn
            self._path_ids = None
            self._fp_index = {}
            self._rows = {}
            self._rows_complete = False
            self._init_schema()

    # -- fingerprints -------------------------------------------------------------------

    def fingerprint_rows(self, ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """The ``fps`` rows of ``ids`` that exist, as tuples in :class:`FpRow` order.

        Cached for the store's life (and kept current by this store's own writes).
        """
        wanted = ids if isinstance(ids, (set, frozenset)) else set(ids)
        with self._mutex:
            rows = self._rows
            missing = [i for i in wanted if i not in rows] if not self._rows_complete else []
            if missing:
                conn = self._db()
                total = conn.execute("SELECT count(*) FROM fps").fetchone()[0]
                if len(missing) * 4 >= total:
                    # Rows this store refreshed are newer than the table's: keep them.
                    fetched = {r[0]: r for r in conn.execute(_FP_SELECT).fetchall()}
                    fetched.update(rows)
                    self._rows = rows = fetched
                    self._rows_complete = True
                else:
                    for r in conn.execute(
                        _FP_SELECT + " WHERE f.id IN (SELECT value FROM json_each(?))",
                        (json.dumps(missing),),
                    ):
                        rows[r[0]] = r
            if len(wanted) == len(rows):
                return rows
            return {i: rows[i] for i in wanted if i in rows}

    def refresh(self, updates: Mapping[int, tuple[Sequence[int], int]]) -> int:
        """Store new ``(sig, verified_ns)`` for fingerprints that were re-hashed and held.

        One transaction; returns the number of rows updated. No-op when empty.
        """
        updates = {fid: u for fid, u in updates.items() if _storable(u[0]) is not None}
        if not updates:
            return 0
        self._require_lock()
        with self._mutex:
            with self._transaction() as conn:
                conn.executemany(
                    "UPDATE fps SET mtime_ns = ?, size = ?, ino = ?, ctime_ns = ?, "
                    "verified_ns = ? WHERE id = ?",
                    [(*sig, int(v), fid) for fid, (sig, v) in updates.items()],
                )
            path_ids = self._path_ids
            for fid, (sig, v) in updates.items():
                row = self._rows.get(fid)
                if row is None:
                    path_ids = self._path_ids = None  # reload the write index lazily
                    continue
                self._rows[fid] = (*row[:5], *sig, int(v))
                pid = path_ids.get(row[1]) if path_ids is not None else None
                if pid is not None:
                    self._fp_index[(pid, row[2], row[3])] = (fid, tuple(sig), int(v))
        return len(updates)

    # -- the CAS ------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        """Where the blob of ``digest`` lives (whether or not it exists)."""
        return Path(self._blob_name(digest))

    def _blob_name(self, digest: str) -> str:
        if not _DIGEST_RE.fullmatch(digest):
            raise ValueError(f"not a blob digest: {digest!r}")
        return f"{self._cas}/{digest[:2]}/{digest[2:]}"

    def has_blob(self, digest: str) -> bool:
        """Whether the CAS holds the blob of ``digest``."""
        return os.path.isfile(self._blob_name(digest))

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` in the CAS; returns its digest (xxh3-128 hex)."""
        digest = xxhash.xxh3_128_hexdigest(data)
        dest = self.blob_path(digest)
        if dest.is_file():
            return digest
        chunks = [_BLOB_PLAIN, data]
        if len(data) > 64 and _compressible(data):
            packed = zlib.compress(data, 6)
            if len(packed) < len(data) * 0.9:
                chunks = [_BLOB_ZLIB, packed]
        self._write_atomic(dest, chunks)
        return digest

    def _write_atomic(self, dest: Path, chunks: Iterable[bytes]) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f"{_TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{dest.name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                for c in chunks:
                    f.write(c)
                f.flush()
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)  # the rename survives a power loss before the record's commit

    def put_file(self, path: str | os.PathLike[str]) -> str:
        """Store the content of the file at ``path`` in the CAS (streamed); returns its digest."""
        self.cas_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.cas_dir / f"{_TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{time.time_ns()}"
        h = xxhash.xxh3_128()
        try:
            with open(path, "rb") as src, open(tmp, "wb") as out:
                first = src.read(_CHUNK)
                h.update(first)
                comp = None
                if len(first) > 64 and _compressible(first):
                    comp = zlib.compressobj(6)
                    out.write(_BLOB_ZLIB)
                    out.write(comp.compress(first))
                else:
                    out.write(_BLOB_PLAIN)
                    out.write(first)
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    out.write(comp.compress(chunk) if comp else chunk)
                if comp is not None:
                    out.write(comp.flush())
                out.flush()
                os.fsync(out.fileno())
            digest = h.hexdigest()
            dest = self.blob_path(digest)
            if dest.is_file():
                os.unlink(tmp)
            else:
                dest.parent.mkdir(exist_ok=True)
                os.replace(tmp, dest)
                _fsync_dir(dest.parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return digest

    def read_blob(self, digest: str) -> bytes:
        """The bytes stored under ``digest`` (verified); ``FileNotFoundError`` if absent."""
        raw = self.blob_path(digest).read_bytes()
        tag, body = raw[:1], raw[1:]
        if tag == _BLOB_ZLIB:
            try:
                data = zlib.decompress(body)
            except zlib.error as e:
                raise CorruptBlob(f"blob {digest} is corrupt: {e}") from None
        elif tag == _BLOB_PLAIN:
            data = body
        else:
            raise CorruptBlob(f"blob {digest} has an unknown format")
        if xxhash.xxh3_128_hexdigest(data) != digest:
            raise CorruptBlob(f"blob {digest} does not match its digest")
        return data

    def restore_outputs(self, outputs: dict[str, str], cwd: str) -> None:
        """Puts a record's declared outputs (``Record.outputs``) back under ``cwd``."""
        for rel, value in outputs.items():
            digest, executable = split_output(value)
            self.restore_file(digest, os.path.join(cwd, rel), executable)

    def restore_file(
        self, digest: str, path: str | os.PathLike[str], executable: bool | None = None
    ) -> bool:
        """Write the blob ``digest`` to ``path`` atomically; False if it already had it.

        ``executable`` (an ``outputs`` value's mark, :func:`split_output`) sets or clears
        the execute bits where the file is readable; None keeps the file's mode."""
        dest = Path(path)
        try:
            with open(dest, "rb") as f:
                h = xxhash.xxh3_128()
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
            if h.hexdigest() == digest:
                mode = os.stat(dest).st_mode & 0o7777
                if executable is None or _with_exec(mode, executable) == mode:
                    return False
                os.chmod(dest, _with_exec(mode, executable))
                return True
        except OSError:
            pass
        data = self.read_blob(digest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o666 & ~_umask()
        with contextlib.suppress(OSError):
            mode = os.stat(dest).st_mode & 0o7777
        if executable is not None:
            mode = _with_exec(mode, executable)
        tmp = dest.parent / f".{dest.name}.memotest-{os.getpid()}-{threading.get_ident()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return True

    def listing_names(self, digest: str) -> list[str] | None:
        """The entry names of a recorded ``LISTING`` fingerprint, if they were saved."""
        try:
            blob = self.read_blob(digest)
        except (OSError, ValueError, StoreError):
            return None
        return [os.fsdecode(n) for n in blob.split(b"\0")] if blob else []

    # -- housekeeping -------------------------------------------------------------------

    def gc_if_due(self) -> GcStats | None:
        """Collects garbage (:meth:`gc`) once the records written since the last collection
        outnumber the records kept (and :data:`GC_MIN_PUTS`): by then about half of what
        the store holds may be fingerprints and blobs of replaced records. Returns what was
        removed, or None when it was not due. Called at the end of a build, with the lock."""
        self._require_lock()
        if not self._puts:
            return None  # nothing replaced since the last look: a no-op build writes nothing
        puts = int(self.get_meta("puts_since_gc") or 0) + self._puts
        self._puts = 0
        with self._mutex:
            records = self._db().execute("SELECT COUNT(*) FROM records").fetchone()[0]
        if puts < max(GC_MIN_PUTS, records):
            self.set_meta("puts_since_gc", puts)
            return None
        return self.gc()

    def gc(self) -> GcStats:
        """Delete fingerprints, paths and blobs no record references, and stray temp files
        (and start counting the writes for :meth:`gc_if_due` again)."""
        self._require_lock()
        self._puts = 0
        self.set_meta("puts_since_gc", 0)
        stats = GcStats()
        with self._mutex:
            conn = self._db()
            keep_fps: set[int] = set()
            keep_blobs: set[str] = set()
            for blob, log, outputs in conn.execute(
                "SELECT inputs, log_digest, outputs FROM records"
            ):
                keep_fps.update(_decode_ids(blob))
                if log:
                    keep_blobs.add(log)
                keep_blobs.update(split_output(v)[0] for v in json.loads(outputs).values())
            with self._transaction() as conn:
                conn.execute("CREATE TEMP TABLE IF NOT EXISTS keep(id INTEGER PRIMARY KEY)")
                conn.execute("DELETE FROM keep")
                conn.executemany("INSERT INTO keep(id) VALUES (?)", ((i,) for i in keep_fps))
                stats.fingerprints = conn.execute(
                    "DELETE FROM fps WHERE id NOT IN (SELECT id FROM keep)"
                ).rowcount
                stats.paths = conn.execute(
                    "DELETE FROM paths WHERE id NOT IN (SELECT path_id FROM fps)"
                ).rowcount
                conn.execute("DELETE FROM keep")
            keep_blobs.update(
                d
                for (d,) in conn.execute(
                    "SELECT digest FROM fps WHERE kind IN ('list', 'code', 'entries')"
                )
            )
            self._path_ids = None
            self._rows = {}
            self._rows_complete = False
        doomed: list[Path] = []
        if self.cas_dir.is_dir():
            for sub in self.cas_dir.iterdir():
                if not sub.is_dir():
                    if sub.name.startswith(_TMP_PREFIX):
                        doomed.append(sub)
                    continue
                for f in sub.iterdir():
                    if f.name.startswith(_TMP_PREFIX) or sub.name + f.name not in keep_blobs:
                        doomed.append(f)
        for f in doomed:
            with contextlib.suppress(OSError):
                size = f.stat().st_size
                f.unlink()
                stats.blobs += 1
                stats.bytes += size
        return stats

    def size_bytes(self) -> int:
        """The bytes the store takes on disk (database, WAL and CAS)."""
        total = 0
        for dirpath, _dirs, files in os.walk(self.dir):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, f)).st_size
        return total


_INT64_MAX = (1 << 63) - 1


def _storable(sig: Sequence[int] | None) -> tuple[int, ...] | None:
    """A signature as stored, or None if SQLite can't hold it (an inode number past 2**63
    on some network file systems): such a file is simply always hashed."""
    if sig is None:
        return None
    out = tuple(int(x) for x in sig)
    return out if all(-_INT64_MAX <= x <= _INT64_MAX for x in out) else None


def _better(
    sig: tuple[int, ...], verified: int, old_sig: tuple[int, ...] | None, old_verified: int
) -> bool:
    """Whether a newly taken signature should replace the stored one of a fingerprint."""
    if old_sig is None:
        return True
    if verified <= old_verified:
        return False
    return tuple(sig) != tuple(old_sig) or is_racy(old_sig, old_verified)


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _acquire_lock(path: Path, timeout: float) -> int:
    """Take the exclusive build lock, waiting up to ``timeout`` s; returns its fd."""
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


def _with_exec(mode: int, executable: bool) -> int:
    """``mode`` with execute bits wherever it has read bits (``chmod +x``), or none."""
    if executable:
        return mode | ((mode & 0o444) >> 2)
    return mode & ~0o111


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it; put back at once
    os.umask(mask)
    return mask
