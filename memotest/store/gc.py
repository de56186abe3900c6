"""Garbage collection: the size bound, and deleting what no stored record references.

Records are replaced, not edited: each run of a target adds a variant (replacing one of the
same observations, or the least recently used beyond the per-target cap), and the
fingerprints and blobs only the old ones named stay behind.

**The size bound** (``settings.max_size``, by default
:data:`memotest.load.config.DEFAULT_MAX_SIZE`): when the store (the live pages of its
database and its blobs) takes more, variants are evicted in least
recently used order (``last_used_ns``: recorded or replayed) until it would take
:data:`LOW_WATER` of the bound, ccache's way (so the next build does not evict again at
once); each evicted variant is charged its share of the database and the blobs no other
variant names, and the store is measured again after the sweep (:func:`evict`). Then the
collection below runs, and the database is compacted (``VACUUM``) when over a quarter of
its pages are free.

A collection keeps what the
records name (their fingerprints, logs and declared outputs,
:func:`memotest.store.records.live_references`) and the blobs that kept fingerprints'
digests name (the kinds of :func:`memotest.inputs.registry.blob_kinds`: listings' names,
code and entry records), and deletes the rest, with stray temporary files of the CAS.

A build collects when it is due (:func:`is_due`): once the records written since the last
collection outnumber the records kept (and :data:`GC_MIN_PUTS`), by when about half of what
the store holds may be fingerprints and blobs of replaced records. The count of those writes
is kept in ``meta`` (``puts_since_gc``) across builds.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from memotest.inputs.registry import blob_kinds
from memotest.store import fingerprints, records
from memotest.store.blobs import LocalBlobStore
from memotest.store.schema import transaction

#: :meth:`memotest.store.Store.gc_if_due` never collects before this many records were written.
GC_MIN_PUTS = 200

#: The ``meta`` key counting the records written since the last collection.
PUTS_KEY = "puts_since_gc"

#: An eviction brings the store down to this share of its bound.
LOW_WATER = 0.9


@dataclass
class GcStats:
    """What :meth:`memotest.store.Store.gc` removed."""

    fingerprints: int = 0
    paths: int = 0
    blobs: int = 0
    bytes: int = 0
    #: Variants evicted by the size bound.
    variants: int = 0


def is_due(puts: int, kept: int) -> bool:
    """Whether ``puts`` records written since the last collection call for one, when the
    store holds ``kept`` records."""
    return puts >= max(GC_MIN_PUTS, kept)


def db_bytes(conn: sqlite3.Connection) -> int:
    """The bytes the database's live pages take (its free pages are reused)."""
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return int(size) * (int(pages) - int(free))


def over_bound(conn: sqlite3.Connection, blobs: LocalBlobStore, max_bytes: int) -> bool:
    """Whether the store takes more than ``max_bytes``."""
    return db_bytes(conn) + sum(blobs.sizes().values()) > max_bytes


def evict(conn: sqlite3.Connection, blob_sizes: dict[str, int], max_bytes: int) -> int:
    """Delete least recently used variants until the store, whose blobs take
    ``blob_sizes``, would take :data:`LOW_WATER` of ``max_bytes``; returns how many."""
    rows = conn.execute(
        "SELECT id, log_digest, outputs, tests_digest, parts FROM records ORDER BY last_used_ns, id"
    ).fetchall()
    if not rows:
        return 0
    total = db_bytes(conn) + sum(blob_sizes.values())
    if total <= max_bytes:
        return 0
    to_free = total - int(max_bytes * LOW_WATER)
    share = db_bytes(conn) // len(rows)  # a variant's share of the database
    named = [
        set(records.named_blobs(log, json.loads(outs), tests, parts))
        for _id, log, outs, tests, parts in rows
    ]
    refs = Counter(d for blobs in named for d in blobs)
    doomed: list[tuple[int]] = []
    freed = 0
    for (vid, *_blobs), digests in zip(rows, named, strict=True):
        if freed >= to_free:
            break
        doomed.append((vid,))
        freed += share
        for d in digests:
            refs[d] -= 1
            if not refs[d]:
                freed += blob_sizes.get(d, 0)
    with transaction(conn):
        conn.executemany("DELETE FROM records WHERE id = ?", doomed)
    return len(doomed)


def collect(
    db: Callable[[], sqlite3.Connection],
    mutex: threading.RLock,
    table: fingerprints.FingerprintTable,
    blobs: LocalBlobStore,
    max_bytes: int | None = None,
) -> GcStats:
    """Evict least recently used variants while the store takes more than ``max_bytes``
    (when given), then delete the fingerprints, paths and blobs no record references, and
    stray temporary files; returns what was removed. ``db`` and ``mutex`` are the store's
    connection and lock, ``table`` its fingerprint tables (whose caches are dropped),
    ``blobs`` its CAS."""
    stats = GcStats()
    for _round in range(4):  # an estimate short of the mark: measure again, evict again
        with mutex:
            conn = db()
            if max_bytes is not None:
                stats.variants += evict(conn, blobs.sizes(), max_bytes)
            keep_fps, keep_blobs = records.live_references(conn)
            with transaction(conn):
                fps, paths = fingerprints.delete_unreferenced(conn, keep_fps)
            stats.fingerprints += fps
            stats.paths += paths
            keep_blobs.update(fingerprints.digests_of_kinds(conn, blob_kinds()))
            table.forget()
        n, size = blobs.sweep(keep_blobs)
        stats.blobs += n
        stats.bytes += size
        with mutex:
            conn = db()
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            if free * 4 > conn.execute("PRAGMA page_count").fetchone()[0]:
                conn.execute("VACUUM")
            if max_bytes is None or not over_bound(conn, blobs, max_bytes):
                break
    return stats
