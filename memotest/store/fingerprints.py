"""Fingerprints: the ``paths`` and ``fps`` tables, shared by every record.

A fingerprint is a (path, kind, digest) with what makes re-checking it cheap: the stat
signature of what was hashed and when (``verified_ns``), and a symlink's text. Paths are
interned in ``paths``; each distinct (path, kind, digest) is one ``fps`` row, which every
record that observed it names by id (:mod:`memotest.store.records`).

When a fingerprint is stored again, or re-hashed and found to hold (:meth:`refresh`), its
signature is replaced only by a newer one that differs or that makes a *racy* one trustworthy
(a file modified within the racy window before it was hashed could change again unseen
under the same signature: :func:`memotest.world.fingerprint.is_racy`).

:class:`FingerprintTable` keeps two caches, valid because only the build holding the lock
writes: the write index (path -> id, (path_id, kind, digest) -> (id, sig, verified_ns)),
loaded on the first write, and the rows read by id, kept current by this store's own writes.

Paths are stored portable, here and nowhere else (:mod:`memotest.world.roots`: ``@project/a.py``),
each converted once; the write index is keyed by the stored form; a symlink's text is kept.

Paths are bytes on Linux: a path (or a symlink's text) that is not UTF-8, held as ``str``
with lone surrogates (``os.fsdecode``), is stored as a BLOB of its bytes, since SQLite's
text is UTF-8 (:func:`to_db`, :func:`from_db`); every other one as the text it always was.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from memotest.model import Input, Kind, StatSig
from memotest.store.schema import transaction
from memotest.world.fingerprint import Fingerprint, is_racy
from memotest.world.roots import Roots

_SELECT = (  # {path}: the stored path made local by SQLite (Roots.sql_local)
    "SELECT f.id, {path}, f.kind, f.digest, f.link, f.mtime_ns, f.size, f.ino, f.ctime_ns, "
    "f.verified_ns FROM fps f JOIN paths p ON p.id = f.path_id"
)

_SET_SIG = (
    "UPDATE fps SET mtime_ns = ?, size = ?, ino = ?, ctime_ns = ?, verified_ns = ? WHERE id = ?"
)

_INT64_MAX = (1 << 63) - 1

#: The write index's entry of a fingerprint: (id, stored signature or None, verified_ns).
_Entry = tuple[int, tuple[int, ...] | None, int]


class FpRow(NamedTuple):
    """One row of the ``fps`` table with its path, in the order of the query.

    :meth:`FingerprintTable.rows` returns plain tuples in this order (the planner's hot
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
        """This row as a :class:`~memotest.world.fingerprint.Fingerprint`."""
        return Fingerprint(
            self.path, Kind(self.kind), self.digest, self.sig, self.verified_ns, self.link
        )


@dataclass
class Interned:
    """What :meth:`FingerprintTable.intern` wrote: the inputs' ids, in order, and the rows
    the write index learns once the transaction is committed (:meth:`~FingerprintTable.learn`)."""

    ids: list[int] = field(default_factory=list)
    paths: dict[str, int] = field(default_factory=dict)
    fps: dict[tuple[int, str, str], _Entry] = field(default_factory=dict)


class FingerprintTable:
    """The ``paths`` and ``fps`` tables of an open store, with their caches.

    ``db`` gives the store's connection; ``mutex`` is the store's lock, held around every
    use of the connection and the caches; ``roots``, what stored paths are relative to;
    ``guard`` is the store's way of calling what reads the database (:mod:`~.damage`),
    used by :meth:`rows`, which lazy inputs call outside any other method of the store.
    """

    def __init__(
        self,
        db: Callable[[], sqlite3.Connection],
        mutex: threading.RLock,
        roots: Roots,
        guard: Callable[[str, Callable[[], Any]], Any] | None = None,
    ) -> None:
        self._db = db
        self.roots = roots
        self._mutex = mutex
        self._guard = guard or (lambda _what, fn: fn())
        self._path_ids: dict[str, int] | None = None  # stored path -> id
        self._fp_index: dict[tuple[int, str, str], _Entry] = {}
        self._rows: dict[int, tuple[Any, ...]] = {}
        self._rows_complete = False

    def forget(self) -> None:
        """Drop the caches (after rows were deleted or the database replaced)."""
        self._path_ids, self._fp_index, self._rows, self._rows_complete = None, {}, {}, False

    def intern(self, conn: sqlite3.Connection, inputs: Iterable[Input]) -> Interned:
        """The ids of ``inputs``' fingerprints, inserting the new ones and storing better
        signatures of known ones, in the caller's transaction; the caller passes the result
        to :meth:`learn` once it committed."""
        path_ids = self._load_write_index()
        index = self._fp_index
        done = Interned()
        portable = self.roots.portable
        for inp in inputs:
            path = portable(inp.path)
            pid = path_ids.get(path) or done.paths.get(path)
            if pid is None:
                pid = _insert_path(conn, to_db(path))
                done.paths[path] = pid
            kind = inp.kind.value if type(inp.kind) is Kind else Kind(inp.kind).value
            key = (pid, kind, inp.digest)
            sig = _storable(getattr(inp, "sig", None))
            verified = getattr(inp, "verified_ns", 0) if sig is not None else 0
            link = getattr(inp, "link", None)
            known = done.fps.get(key) or index.get(key)
            if known is None:
                cur = conn.execute(
                    "INSERT INTO fps(path_id, kind, digest, link, mtime_ns, size, ino, "
                    "ctime_ns, verified_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (pid, kind, inp.digest, to_db(link), *(sig or (None,) * 4), verified),
                )
                fid = cur.lastrowid
                assert fid is not None
                done.fps[key] = (fid, sig, verified)
            else:
                fid, old_sig, old_verified = known
                if sig is not None and _better(sig, verified, old_sig, old_verified):
                    conn.execute(_SET_SIG, (*sig, verified, fid))
                    done.fps[key] = (fid, sig, verified)
            done.ids.append(fid)
        return done

    def learn(self, done: Interned) -> None:
        """Committed: the caches learn what :meth:`intern` made."""
        assert self._path_ids is not None
        self._path_ids.update(done.paths)
        self._fp_index.update(done.fps)
        for fid, _sig, _v in done.fps.values():
            self._rows.pop(fid, None)
        if done.fps:
            self._rows_complete = False

    def _load_write_index(self) -> dict[str, int]:
        if self._path_ids is not None:
            return self._path_ids
        conn = self._db()
        path_ids = self._path_ids = {
            from_db(p): i for p, i in conn.execute("SELECT path, id FROM paths")
        }
        index = self._fp_index
        index.clear()
        for fid, pid, kind, digest, m, s, i, c, v in conn.execute(
            "SELECT id, path_id, kind, digest, mtime_ns, size, ino, ctime_ns, verified_ns FROM fps"
        ):
            index[(pid, kind, digest)] = (fid, None if m is None else (m, s, i, c), v)
        return path_ids

    def rows(self, ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """The ``fps`` rows of ``ids`` that exist, as tuples in :class:`FpRow` order.

        Cached for the store's life (and kept current by this store's own writes).
        """
        wanted = ids if isinstance(ids, (set, frozenset)) else set(ids)
        rows: dict[int, tuple[Any, ...]] = self._guard(
            "reading fingerprints", lambda: self._load_rows(wanted)
        )
        if len(wanted) == len(rows):
            return rows
        return {i: rows[i] for i in wanted if i in rows}

    def _load_rows(self, wanted: set[int] | frozenset[int]) -> dict[int, tuple[Any, ...]]:
        """The cache of rows, holding every row of ``wanted`` that exists."""
        with self._mutex:
            rows = self._rows
            missing = [i for i in wanted if i not in rows] if not self._rows_complete else []
            if missing:
                conn = self._db()
                total = conn.execute("SELECT count(*) FROM fps").fetchone()[0]
                if len(missing) * 4 >= total:
                    # Rows this store refreshed are newer than the table's: keep them.
                    sql, local = self.roots.sql_local(_SELECT, "p.path"), self.roots.local
                    fetched = {r[0]: _text_row(r, local) for r in conn.execute(*sql)}
                    fetched.update(rows)
                    self._rows = rows = fetched
                    self._rows_complete = True
                else:
                    sql, params = self.roots.sql_local(_SELECT, "p.path")
                    sql += " WHERE f.id IN (SELECT value FROM json_each(?))"
                    for r in conn.execute(sql, (*params, json.dumps(missing))):
                        rows[r[0]] = _text_row(r, self.roots.local)
            return rows

    def refresh(self, updates: Mapping[int, tuple[Sequence[int], int]]) -> int:
        """Store new ``(sig, verified_ns)`` of fingerprints re-hashed and found to hold, in
        one transaction (the signatures must be :func:`storable_updates`); returns the count."""
        with self._mutex:
            with transaction(self._db()) as conn:
                conn.executemany(
                    _SET_SIG, [(*sig, int(v), fid) for fid, (sig, v) in updates.items()]
                )
            path_ids = self._path_ids
            for fid, (sig, v) in updates.items():
                row = self._rows.get(fid)
                if row is None:
                    path_ids = self._path_ids = None  # reload the write index lazily
                    continue
                self._rows[fid] = (*row[:5], *sig, int(v))
                pid = path_ids.get(self.roots.portable(row[1])) if path_ids is not None else None
                if pid is not None:
                    self._fp_index[(pid, row[2], row[3])] = (fid, tuple(sig), int(v))
        return len(updates)

    def ids_of_paths(self, paths: Iterable[str]) -> set[int]:
        """The ids of every stored fingerprint of any of ``paths``."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return set()
        stored = [to_db(self.roots.portable(p)) for p in wanted]
        texts = [p for p in stored if isinstance(p, str)]
        sql = "SELECT f.id FROM fps f JOIN paths p ON p.id = f.path_id WHERE p.path"
        with self._mutex:
            conn = self._db()
            ids = {
                r[0]
                for r in conn.execute(
                    sql + " IN (SELECT value FROM json_each(?))", (json.dumps(texts),)
                )
            }
            for raw in stored:
                if isinstance(raw, bytes):
                    ids.update(r[0] for r in conn.execute(sql + " = ?", (raw,)))
            return ids


def storable_updates(
    updates: Mapping[int, tuple[Sequence[int], int]],
) -> dict[int, tuple[Sequence[int], int]]:
    """The ``(sig, verified_ns)`` updates whose signature SQLite can hold (:func:`_storable`)."""
    return {fid: u for fid, u in updates.items() if _storable(u[0]) is not None}


def delete_unreferenced(conn: sqlite3.Connection, keep: Iterable[int]) -> tuple[int, int]:
    """Delete the fingerprints not in ``keep`` and the paths no fingerprint is of, in the
    caller's transaction; returns (fingerprints, paths) deleted."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS keep(id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM keep")
    conn.executemany("INSERT INTO keep(id) VALUES (?)", ((i,) for i in keep))
    fps = conn.execute("DELETE FROM fps WHERE id NOT IN (SELECT id FROM keep)").rowcount
    paths = conn.execute("DELETE FROM paths WHERE id NOT IN (SELECT path_id FROM fps)").rowcount
    conn.execute("DELETE FROM keep")
    return fps, paths


def digests_of_kinds(conn: sqlite3.Connection, kinds: Iterable[str]) -> set[str]:
    """The digests of the stored fingerprints of the stored kind names ``kinds``."""
    return {
        d
        for (d,) in conn.execute(
            "SELECT digest FROM fps WHERE kind IN (SELECT value FROM json_each(?))",
            (json.dumps(list(kinds)),),
        )
    }


def to_db(text: str | None) -> str | bytes | None:
    """A path (or a symlink's text) as stored: itself when it is UTF-8, else its bytes."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text)
    return text


def from_db(value: str | bytes | None) -> str | None:
    """A stored path as memotest holds it (:func:`to_db` undone)."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


def _text_row(r: tuple[Any, ...], local: Callable[[str], str]) -> tuple[Any, ...]:
    """An ``fps`` row (:data:`_SELECT`) with its path made ``local`` and its link ``str``."""
    path = r[1]
    if type(path) is str and path[:1] != "@" and type(r[4]) is not bytes:
        return r
    return (r[0], local(from_db(path)), *r[2:4], from_db(r[4]), *r[5:])


def _insert_path(conn: sqlite3.Connection, path: str | bytes | None) -> int:
    try:
        cur = conn.execute("INSERT INTO paths(path) VALUES (?)", (path,))
    except sqlite3.IntegrityError:  # pragma: no cover - the cache said it was new
        row = conn.execute("SELECT id FROM paths WHERE path = ?", (path,)).fetchone()
        return int(row[0])
    assert cur.lastrowid is not None
    return cur.lastrowid


def _storable(sig: Sequence[int] | None) -> tuple[int, ...] | None:
    """A signature as stored, or None if SQLite can't hold it (an inode number past 2**63
    on some network file systems): such a file is simply always hashed."""
    if sig is None:
        return None
    out = tuple(map(int, sig))
    return out if not out or (min(out) >= -_INT64_MAX and max(out) <= _INT64_MAX) else None


def _better(
    sig: tuple[int, ...], verified: int, old_sig: tuple[int, ...] | None, old_verified: int
) -> bool:
    """Whether a newly taken signature should replace the stored one of a fingerprint."""
    if old_sig is None:
        return True
    if verified <= old_verified:
        return False
    return tuple(sig) != tuple(old_sig) or is_racy(old_sig, old_verified)
