"""The distinct fingerprint ids of many records, remembered: the no-op path's shortcut.

A no-op build checks each *distinct* fingerprint its targets' candidate runs name once
(:mod:`memotest.check.plan`). Finding them means merging every candidate's id array: 1,000
targets of 2,000 inputs each are 2 million ids, a cost in Python that no amount of
stat'ing saves. Yet the candidates of a build are usually those of the build before, so
the union is remembered, under a digest of the candidates' *stored bytes*: each record's
``inputs`` column (:mod:`memotest.store.idarrays`), length-prefixed, in variant id order.
The same bytes decode to the same ids, so a hit is exactly the union that would be
computed, whatever happened to the store in between (a row deleted and its id reused
holds other bytes; a fingerprint deleted is missing from the table and so never holds).
No id array is even decompressed on a hit: when every fingerprint of the union holds,
every candidate holds, and the planner decides them all without looking at one.

The :data:`KEEP` most recent unions are kept (a build of a few targets and a build of all
alternate without evicting each other), in the ``meta`` table as one JSON value; each
entry carries an xxh3 digest of its ids, checked on reading, so a damaged entry is a miss,
never a wrong union. Planning writes nothing: a union merged by a store with the build
lock waits, and is written in the transaction that marks the build's replays used
(:meth:`~memotest.store.Store.mark_used`), which a build that replays something makes
anyway; a read-only ``explain`` uses what is there. Unions of fewer than
:data:`MIN_RECORDS` records, cheap to merge (a re-check of a few targets), are not kept.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import xxhash

from memotest.store import idarrays
from memotest.store.idarrays import InputList
from memotest.store.records import Record

T = TypeVar("T")

#: The ``meta`` key of the remembered unions.
UNIONS_KEY = "plan-unions"

#: How many unions are remembered.
KEEP = 4

#: The fewest records whose union is remembered.
MIN_RECORDS = 16


def union_key(recs: Iterable[Record]) -> str:
    """The digest that names the union of ``recs``' inputs: of their stored id arrays."""
    h = xxhash.xxh3_128()
    for rec in sorted(recs, key=lambda r: r.variant_id or 0):
        inputs = rec.inputs
        raw = inputs.raw if isinstance(inputs, InputList) else None
        if raw is None:  # not read lazily: name it by its ids, in another domain
            raw = b"ids:" + array("I", sorted({int(i) for i in _ids(rec)})).tobytes()
        h.update(b"%d:" % len(raw))
        h.update(raw)
    return h.hexdigest()


def _ids(rec: Record) -> Any:
    inputs = rec.inputs
    if not isinstance(inputs, InputList):  # pragma: no cover - records from the store do
        raise TypeError("the planner needs records loaded by the store")
    return inputs.ids


class Unions:
    """The :class:`~memotest.store.Store`'s part that merges and remembers id arrays."""

    locked: bool
    _pending_unions: list[dict[str, Any]]

    def _guarded(self, what: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError

    def get_meta(self, key: str) -> Any:
        raise NotImplementedError

    def set_meta(self, key: str, value: Any) -> None:
        raise NotImplementedError

    def input_ids(self, recs: Sequence[Record]) -> list[Any] | None:
        """The id arrays of ``recs`` (records this store read), decompressed as damage is
        met (:mod:`.damage`): None when one did not decode and the database was set aside,
        the records in hand being then gone (the caller starts again)."""
        tried: list[bool] = []

        def read() -> list[Any] | None:
            if tried:
                return None
            tried.append(True)
            return [_ids(r) for r in recs]

        return self._guarded("reading the records", read)

    def union_of(self, recs: Sequence[Record]) -> set[int] | None:
        """The distinct fingerprint ids of ``recs``' inputs, remembered or merged (and then
        remembered, with the lock); None as :meth:`input_ids` when a record is damaged."""
        key = union_key(recs)
        entries = self._entries()
        for entry in entries:
            if entry.get("key") == key:
                ids = _entry_ids(entry)
                if ids is not None:
                    return set(ids)
        arrays = self.input_ids(recs)
        if arrays is None:
            return None
        out: set[int] = set()
        for arr in arrays:
            out.update(arr)  # at C speed; a comprehension would walk the ids in Python
        if self.locked and len(recs) >= MIN_RECORDS:
            blob = idarrays.encode(out)
            check = xxhash.xxh3_128_hexdigest(idarrays.decode(blob).tobytes())
            new = {"key": key, "ids": base64.b64encode(blob).decode("ascii"), "check": check}
            self._pending_unions.append(new)
        return out

    def take_unions(self) -> list[dict[str, Any]] | None:
        """The unions to keep, the ones merged since the last call first, to write under
        :data:`UNIONS_KEY` (None when none was merged)."""
        pending, self._pending_unions = self._pending_unions, []
        if not pending:
            return None
        keys = {e["key"] for e in pending}
        kept = [e for e in self._entries() if e.get("key") not in keys]
        return [*reversed(pending), *kept][:KEEP]

    def _entries(self) -> list[dict[str, Any]]:
        try:
            found = self.get_meta(UNIONS_KEY)
        except ValueError:  # not JSON: as if absent (the next write replaces it)
            return []
        if not isinstance(found, list):
            return []
        return [e for e in found if isinstance(e, dict)]


def _entry_ids(entry: dict[str, Any]) -> array[int] | None:
    """The ids of a remembered union, or None if the entry does not check out."""
    try:
        ids = idarrays.decode(base64.b64decode(entry["ids"], validate=True))
    except (KeyError, TypeError, ValueError, binascii.Error, zlib.error):
        return None
    if xxhash.xxh3_128_hexdigest(ids.tobytes()) != entry.get("check"):
        return None
    return ids
