"""The record store: ``.memotest/`` beside the targets file.

Layout::

    .memotest/lock          flock'ed by the build that writes (holds its pid)
    .memotest/db.sqlite     records, interned paths and fingerprints (SQLite, WAL mode)
    .memotest/cas/ab/cd...  content-addressed blobs (logs, declared outputs, directory
                            listings), named by the xxh3-128 hex digest of their content
    .memotest/warm.json     not the store's: what the warm workers of the targets run in
                            this folder preload (``memotest/tracer/warm/preload.py``)

The rooms, one module each:

- :mod:`~memotest.store.store`: :class:`Store`, an open store, which orders the writes
  of the others for crash safety;
- :mod:`~memotest.store.lock`: the build lock (one build writes at a time);
- :mod:`~memotest.store.schema`: the SQLite tables, the format version (a store of another
  version is emptied), connections and transactions;
- :mod:`~memotest.store.records`: :class:`Record`, the ``records`` table: many variants
  per target (each a recorded run with the fingerprints it needs), at most
  :data:`MAX_VARIANTS` per target, the least recently used going first;
- :mod:`~memotest.store.fingerprints`: the ``paths`` and ``fps`` tables records share,
  and their caches;
- :mod:`~memotest.store.blobs`: the content-addressed blobs behind a small interface
  (:class:`~memotest.store.blobs.BlobStore`), kept in ``cas/``;
- :mod:`~memotest.store.outputs`: declared outputs, named in records and restored;
- :mod:`~memotest.store.gc`: the size bound (``settings.max_size``: least recently used
  variants evicted) and deleting what no record references;
- :mod:`~memotest.store.housekeeping`: the :class:`Store`'s part that marks replayed
  variants used (once per build, one transaction) and runs the GC;
- :mod:`~memotest.store.damage`: what a damaged store is, and how a build sets it aside
  and goes on (a damaged store never yields a hit; ``memotest clean`` always works).

Crash safety: a blob is visible under its digest only when complete, and is stored
*before* the transaction of the record that references them; a record (its row, its
fingerprint rows and its input array) is one transaction. A process killed at any instant
leaves a store with each record either absent or complete. One build writes at a time:
:meth:`Store.open` takes an exclusive ``flock`` on ``.memotest/lock``; read-only users
(explain, show, list) open with ``lock=False`` and read through WAL snapshots.
"""

from memotest.store.errors import CorruptBlob, StoreDamaged, StoreError, StoreLocked
from memotest.store.fingerprints import FpRow
from memotest.store.gc import GC_MIN_PUTS, GcStats
from memotest.store.idarrays import InputList
from memotest.store.outputs import EXECUTABLE_MARK, output_value, split_output
from memotest.store.records import MAX_VARIANTS, STATUSES, Head, Record, default_recorder
from memotest.store.schema import SCHEMA_VERSION
from memotest.store.store import STORE_DIR, Store

__all__ = [
    "EXECUTABLE_MARK",
    "GC_MIN_PUTS",
    "MAX_VARIANTS",
    "SCHEMA_VERSION",
    "STATUSES",
    "STORE_DIR",
    "CorruptBlob",
    "FpRow",
    "GcStats",
    "Head",
    "InputList",
    "Record",
    "Store",
    "StoreDamaged",
    "StoreError",
    "StoreLocked",
    "default_recorder",
    "output_value",
    "split_output",
]
