"""Which recorded fingerprints hold now: the no-op build's hot loop.

The planner (:mod:`memotest.check.plan`) gives a :class:`Checker` the *distinct* fingerprint ids
its candidate runs name (their union, remembered by the store between builds:
:mod:`memotest.store.unions`), and each is validated once for every run of every target
that names it: the kind's checker (``inputs/``), one ``lstat`` per path and no hashing
while the stat signature is the recorded one and not racy (``FileStates``). A run holds
iff its id array is disjoint from :attr:`Checker.invalid`; when that set is empty, as in
a no-op build, every run named holds without its array being looked at (:meth:`holds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memotest.inputs.registry import begin_check, verifiers
from memotest.store import InputList, Record, Store
from memotest.world.fingerprint import FileStates, Refresh

__all__ = ["Checker"]


class Checker:
    """The fingerprints of one plan, each validated once: ``invalid`` grows as
    :meth:`validate` is given more ids; ``rows`` are their ``fps`` rows, ``refresh`` the
    new signatures of those re-hashed and found to hold."""

    def __init__(self, store: Store, states: FileStates) -> None:
        self.store = store
        self.states = states
        self.rows: dict[int, tuple[Any, ...]] = {}
        self.invalid: set[int] = set()
        self.refresh: dict[int, tuple[Sequence[int], int]] = {}
        self.done: set[int] = set()
        self.verify = verifiers()
        self.described: dict[int, str] = {}
        self.late_kinds = begin_check(states)

    def validate(self, ids: set[int]) -> None:
        needed = ids - self.done
        if not needed:
            return
        self.done |= needed
        rows = self.store.fingerprint_rows(needed)
        self.rows.update(rows)
        verify, states, invalid = self.verify, self.states, self.invalid
        # Newest first: when a path has several fingerprints, the current one (usually the
        # newest) is proven by its stat signature and the older ones fail without hashing.
        # The kinds that rely on what the others' checks stat'ed go last: appended to the
        # list the loop is going through, they come back once it reaches its first end.
        todo = sorted(needed, reverse=True)
        first, late = len(todo), self.late_kinds
        for i, fid in enumerate(todo):
            row = rows.get(fid)
            if row is None:
                invalid.add(fid)
                continue
            if i < first and row[2] in late:
                todo.append(fid)
                continue
            # row: id, path, kind, digest, link, mtime_ns, size, ino, ctime_ns, verified_ns
            sig = row[5:9] if row[5] is not None else None
            check = verify.get(row[2])
            verdict = check(states, row[1], row[3], sig, row[9], row[4]) if check else False
            if verdict is True:
                continue
            if verdict is False:
                invalid.add(fid)
            elif isinstance(verdict, Refresh):
                self.refresh[fid] = (verdict.sig, verdict.verified_ns)

    def holds(self, rec: Record) -> bool:
        """Whether ``rec``, read by the store and its ids validated, holds; its id array
        is only looked at when something is invalid (its decompression may wait)."""
        invalid = self.invalid
        if not invalid:
            return True
        inputs = rec.inputs
        if not isinstance(inputs, InputList):  # pragma: no cover - records from the store do
            raise TypeError("the planner needs records loaded by the store")
        return invalid.isdisjoint(inputs.ids)
