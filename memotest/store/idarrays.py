"""A record's inputs as stored: a sorted array of fingerprint ids, and its lazy view.

The ``records.inputs`` column is a zlib-compressed array of ``fps.id`` (uint32, little
endian, sorted, each once): :func:`encode` and :func:`decode`. Records share their
fingerprints (:mod:`memotest.store.fingerprints`), so 1,000 records of 2,000 inputs each
cost a few MB.

:class:`InputList` is a record's ``inputs`` as read from the store. It keeps the stored
bytes (``raw``) and decompresses them into ids only when asked (``ids``): the no-op path
(:mod:`memotest.check.holds`) names a set of records by their bytes and never decompresses the
arrays of records it finds holding as a whole; the fingerprints themselves are made only
when the inputs are iterated (``explain``, the scheduler's conflict checks).
"""

from __future__ import annotations

import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

from memotest.store.damage import Garbled
from memotest.store.errors import StoreError
from memotest.world.fingerprint import Fingerprint

if TYPE_CHECKING:
    from memotest.store.fingerprints import FingerprintTable


def encode(ids: Iterable[int]) -> bytes:
    """The stored form of a set of fingerprint ids."""
    arr = array("I", sorted(set(ids)))
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return zlib.compress(arr.tobytes(), 6)


def decode(blob: bytes) -> array[int]:
    """The sorted ids of a stored array (``zlib.error`` or ``ValueError`` if garbled)."""
    arr = array("I")
    arr.frombytes(zlib.decompress(blob))
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return arr


class InputList(Sequence[Fingerprint]):
    """A record's inputs as fingerprint ids, turned into fingerprints on first access.

    ``ids`` is the sorted ``array('I')`` of ``fps.id``, decompressed from ``raw`` (the
    stored bytes, None when made from ids) on first access; the planner works on them
    directly. Materializing needs the store that loaded it to still be open; ids whose
    row is gone are left out.
    """

    def __init__(
        self, ids: array[int] | None, table: FingerprintTable, raw: bytes | None = None
    ) -> None:
        if ids is None and raw is None:
            raise ValueError("an InputList needs its ids or their stored bytes")
        self._ids = ids
        self.raw = raw
        self._table: FingerprintTable | None = table
        self._items: list[Fingerprint] | None = None

    @property
    def ids(self) -> array[int]:
        """The fingerprint ids, sorted."""
        if self._ids is None:
            assert self.raw is not None
            try:
                self._ids = decode(self.raw)
            except (ValueError, zlib.error) as exc:
                raise Garbled(f"a record's inputs do not decode: {exc}") from None
        return self._ids

    def _materialize(self) -> list[Fingerprint]:
        from memotest.store.fingerprints import FpRow

        if self._items is None:
            if self._table is None:  # pragma: no cover - defensive
                raise StoreError("the store these inputs came from is gone")
            rows = self._table.rows(self.ids)
            # A fingerprint missing from the store (damage) is left out here: such a
            # record is never fresh (the planner checks the ids), so what is listed is
            # only ever shown or used to order runs.
            items = [FpRow._make(rows[i]).fingerprint() for i in self.ids if i in rows]
            items.sort(key=lambda f: (f.path, f.kind.value, f.digest))
            self._items = items
            self._table = None
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
