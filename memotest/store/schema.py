"""The store's SQLite database: its tables, its format version, connecting, transactions.

Schema (``SCHEMA_VERSION``)::

    meta(key TEXT PRIMARY KEY, value TEXT)
    paths(id INTEGER PRIMARY KEY, path TEXT UNIQUE)
    fps(id INTEGER PRIMARY KEY, path_id, kind, digest, link, mtime_ns, size, ino, ctime_ns,
        verified_ns, UNIQUE(path_id, kind, digest))
    records(id INTEGER PRIMARY KEY, name, recorder, def_hash, definition JSON, env_hash,
            env JSON, status, exit_code, duration, started_ns, finished_ns, cacheable,
            uncacheable_reason, n_inputs, inputs BLOB, writes BLOB, log_digest, outputs JSON,
            rewritten BLOB, shaping JSON, tests_digest, parts, last_used_ns)
    INDEX records_name ON records(name)

``records`` holds many rows (variants) per target name (format 4; format 3 had one);
format 5 added ``tests_digest``, the blob of a run's per-test results, and ``parts``, the
blob of which code each test of the run depended on (``memotest/recording/parts.py``), or NULL.

``records`` is :mod:`memotest.store.records`' table, ``paths`` and ``fps``
:mod:`memotest.store.fingerprints`'; ``meta`` holds the format version (key ``schema``) and
small JSON values (:func:`get_meta`). The database runs in WAL mode with
``synchronous=NORMAL``: a commit is atomic, and readers see a consistent snapshot while a
build writes.

The store is a cache: a store of another format version is emptied and made anew by the
next build (which holds the lock); read-only users refuse it and say so.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memotest.store.errors import StoreError

#: Bumped when the database layout changes; a store of another version is emptied.
SCHEMA_VERSION = 5

#: The database's file name in the store's folder.
DB_FILE = "db.sqlite"

_TABLES = ("records", "fps", "paths", "meta")

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
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
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
    rewritten BLOB NOT NULL,
    shaping TEXT NOT NULL DEFAULT '[]',
    tests_digest TEXT,
    parts TEXT,
    last_used_ns INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS records_name ON records(name);
"""


def connect(db_path: Path, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection to the database at ``db_path`` (created if absent), in WAL mode.

    Autocommit (transactions are explicit: :func:`transaction`), usable from any thread
    (the store guards it with its own lock), waiting up to ``timeout`` s for SQLite's locks.
    """
    conn = sqlite3.connect(
        str(db_path), isolation_level=None, timeout=timeout, check_same_thread=False
    )
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed when the block ends, rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def init_schema(conn: sqlite3.Connection, *, writable: bool, db_path: Path) -> None:
    """Make the tables of :data:`SCHEMA_VERSION` (emptying a store of another version).

    Without ``writable`` (a read-only user), a store of another version raises
    :class:`~memotest.store.StoreError` asking for a build; a new store is made anyway.
    """
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError:
        row = None
    if row is not None and row[0] == str(SCHEMA_VERSION):
        return
    if row is not None and not writable:
        raise StoreError(
            f"{db_path} has store format {row[0]}, this memotest uses "
            f"{SCHEMA_VERSION}: run a build to upgrade it"
        )
    with transaction(conn):
        if row is not None:  # another format: it is a cache, start over
            for table in _TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?)",
            (str(SCHEMA_VERSION),),
        )


def get_meta(conn: sqlite3.Connection, key: str) -> Any:
    """The JSON value kept under ``key`` in ``meta`` (None when absent)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
    """Keep the JSON value ``value`` under ``key`` in ``meta`` (in the caller's transaction)."""
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
