"""A record's own paths in portable form, converted where the store writes and reads them.

The inputs' paths are converted by the fingerprint table (:mod:`~memotest.store.fingerprints`);
a record holds more paths: what it wrote or deleted (``writes``) and what of that it had read
before (``rewritten``). They are stored under the project's roots (:mod:`memotest.world.roots`:
``@project/out/x``) and read back as paths on this machine, so that no module but the store
knows. A record's ``definition`` and ``env`` are already portable (the key is computed from
portable forms, :mod:`memotest.check.keys`); its declared ``outputs`` are relative to the target's
folder; listings hold names only.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from memotest.store.records import Record
from memotest.world.roots import Roots

K = TypeVar("K")


def stored(record: Record, roots: Roots) -> Record:
    """``record`` with its paths as stored (its inputs are left to the fingerprint table)."""
    portable = roots.portable
    return dataclasses.replace(
        record,
        writes=[portable(p) for p in record.writes],
        rewritten=[portable(p) for p in record.rewritten],
    )


def loaded(records: dict[K, Record], roots: Roots) -> dict[K, Record]:
    """``records`` as read from the store, with their paths made local (in place)."""
    local = roots.local
    for rec in records.values():
        if rec.writes:
            rec.writes = [local(p) for p in rec.writes]
        if rec.rewritten:
            rec.rewritten = [local(p) for p in rec.rewritten]
    return records
