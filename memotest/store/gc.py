"""Garbage collection: deleting what no stored record references any more.

Records are replaced, not edited: each run of a target writes a new record, and the
fingerprints and blobs only the old one named stay behind. A collection keeps what the
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

import sqlite3
import threading
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


@dataclass
class GcStats:
    """What :meth:`memotest.store.Store.gc` removed."""

    fingerprints: int = 0
    paths: int = 0
    blobs: int = 0
    bytes: int = 0


def is_due(puts: int, kept: int) -> bool:
    """Whether ``puts`` records written since the last collection call for one, when the
    store holds ``kept`` records."""
    return puts >= max(GC_MIN_PUTS, kept)


def collect(
    db: Callable[[], sqlite3.Connection],
    mutex: threading.RLock,
    table: fingerprints.FingerprintTable,
    blobs: LocalBlobStore,
) -> GcStats:
    """Delete the fingerprints, paths and blobs no record references, and stray temporary
    files; returns what was removed. ``db`` and ``mutex`` are the store's connection and
    lock, ``table`` its fingerprint tables (whose caches are dropped), ``blobs`` its CAS."""
    stats = GcStats()
    with mutex:
        conn = db()
        keep_fps, keep_blobs = records.live_references(conn)
        with transaction(conn):
            stats.fingerprints, stats.paths = fingerprints.delete_unreferenced(conn, keep_fps)
        keep_blobs.update(fingerprints.digests_of_kinds(conn, blob_kinds()))
        table.forget()
    stats.blobs, stats.bytes = blobs.sweep(keep_blobs)
    return stats
