"""Which targets may run at the same time, in what order, and what went wrong when they did.

The rules, after Rattle's hazards and ElectricTest's dependent tests:

* Two targets **conflict** if one writes a path the other reads, stats, looks for, lists
  or writes; creating or deleting an entry writes its directory, listing it reads it.
  Read-read sharing is not a conflict.
* The reference semantics is the **serial order**: ``needs`` first, else the order of the
  targets file. Every conflict between two targets that will run becomes an edge from the
  earlier to the later one in that order, so they never overlap and the later one sees
  the earlier one's writes, as in a serial run. Conflicts come from each target's last
  record and from edges learned from past hazards.
* After targets ran in parallel, a **hazard** is a conflict between two of them where the
  later one (in serial order) started before the earlier one finished: what it observed
  may not be what a serial run would have shown it. Their results are not kept; they run
  again one at a time, and the edge is remembered. Not a hazard: a path the earlier one
  had changed for the last time before the later one started (its change time when the
  earlier one ended, on the file system's clock, is older than the later one's start):
  what the later one found there (read, stat'ed, listed, looked up) was the earlier one's
  last state of it, as in the serial run (:func:`conflict`). A path both wrote stays a
  hazard. Nor is an entry made or removed in a folder the other listed only to look
  for names it is not one of (:func:`_looked_for`).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from memotest.inputs.registry import is_listing
from memotest.model import Kind, Target, changed_since

#: Edges learned from hazards are kept in the store under this key.
LEARNED_KEY = "learned_edges"


@dataclass
class Footprint:
    """What a target reads and writes, as far as conflicts are concerned."""

    reads: set[str] = field(default_factory=set)  # read, stat'ed, looked for, executed
    listed: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    entry_dirs: set[str] = field(default_factory=set)  # dirs that gained or lost entries
    #: Folders it made (``mkdir``: absent before) and left as folders: a run that only
    #: found one of them (a successful lookup, no listing, no read) saw what stays there.
    made_dirs: set[str] = field(default_factory=set)
    #: Of ``reads``: the paths it only found (``stat``, ``access``, a ``mkdir`` that
    #: answered EEXIST), neither read, executed nor looked for in vain.
    found: set[str] = field(default_factory=set)
    #: For a run of this build: when it ended, the change times (``mtime_ns``,
    #: ``ctime_ns``) of each path in ``writes`` and ``entry_dirs``, of its folder for a
    #: path no longer there; a path without them (it could not be stat'ed) is not known.
    changed: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Of ``entry_dirs``: the names of the entries it made or removed in each.
    entry_names: dict[str, set[str]] = field(default_factory=dict)
    #: Of ``listed``: the folders that only readers looking for certain names listed
    #: (``Trace.listings``), each with a test of an entry's name: whether they looked
    #: for it (``memotest/inputs/entries.py``'s ``entries_matcher``).
    looked_for: dict[str, Callable[[str, str | None], bool]] = field(default_factory=dict)

    def done_before(self, paths: set[str], started_ns: int, fs_started_ns: int) -> set[str]:
        """Of ``paths``, those this run had changed for the last time before a run that
        started at ``started_ns`` (``fs_started_ns`` on the file system's clock) did:
        nothing changed them from that start to this run's end."""
        return {
            p
            for p in paths
            if p in self.changed and not changed_since(*self.changed[p], started_ns, fs_started_ns)
        }

    @classmethod
    def of(
        cls,
        inputs: Iterable[tuple[str, Kind]],
        writes: Iterable[str],
        entry_changes: Iterable[str] | None = None,
    ) -> Footprint:
        """From a record's inputs and writes. ``entry_changes`` are the written paths
        that created or deleted an entry; by default every write is assumed to."""
        fp = cls()
        for path, observed in inputs:
            (fp.listed if is_listing(observed) else fp.reads).add(path)
        fp.writes = set(writes)
        changed = fp.writes if entry_changes is None else set(entry_changes)
        fp.entry_dirs = {os.path.dirname(p) for p in changed}
        return fp


def conflict(a: Footprint, b: Footprint, b_started: tuple[int, int] | None = None) -> str | None:
    """A path through which ``a`` and ``b`` interfere, or None.

    ``b_started``, given when ``a`` comes first in serial order and ``b`` started before
    ``a`` ended: ``b``'s start (``started_ns``, ``fs_started_ns``). A path ``a`` had
    changed for the last time before then (:meth:`Footprint.done_before`) does not
    count where ``b`` only observed it: ``b`` found ``a``'s last state of it whenever it
    looked, read or listed it, as in a serial run where ``a`` ends before ``b`` starts.
    Not where both wrote it (``a`` may have read back what it wrote after ``b`` wrote:
    what a run reads after its own write is not in its trace), and not in the other
    direction: ``b``'s changes must not be seen by ``a``, whenever they were made."""
    for w, other, start in ((a, b, b_started), (b, a, None)):
        if not w.writes:
            continue
        seen = other.reads - (w.made_dirs & other.found)
        done = w.done_before(w.writes | w.entry_dirs, *start) if start else set()
        observed = w.writes - done
        hit = observed & seen or w.writes & other.writes or observed & other.listed
        if hit:
            return min(hit)
        hit = {d for d in (w.entry_dirs - done) & other.listed if _looked_for(w, other, d)}
        if hit:
            return min(hit)
    return None


def _looked_for(w: Footprint, other: Footprint, folder: str) -> bool:
    """Whether ``other``'s listing of ``folder`` could have seen the entries ``w`` made
    or removed there: always, unless only readers looking for certain names listed it
    and none of those entries is one of them (what such a listing shows, which of the
    names it looked for are there, did not change)."""
    looked = other.looked_for.get(folder)
    names = w.entry_names.get(folder)
    if looked is None or names is None:
        return True
    return any(looked(name, None) for name in names)


def serial_order(targets: list[Target]) -> dict[str, int]:
    """Each target's position in a serial run: needs first, else file order."""
    index = {t.name: i for i, t in enumerate(targets)}
    indegree = {t.name: 0 for t in targets}
    after: dict[str, list[str]] = {t.name: [] for t in targets}
    for t in targets:
        for n in t.needs:
            if n in index:
                indegree[t.name] += 1
                after[n].append(t.name)
    heap = [index[n] for n, d in indegree.items() if d == 0]
    heapq.heapify(heap)
    names = [t.name for t in targets]
    order: dict[str, int] = {}
    while heap:
        name = names[heapq.heappop(heap)]
        order[name] = len(order)
        for m in after[name]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(heap, index[m])
    for t in targets:  # a cycle cannot happen (the loader rejects it); be total anyway
        order.setdefault(t.name, len(order))
    return order


@dataclass(frozen=True)
class Edge:
    """``before`` must finish before ``after`` starts. ``kind``: needs, conflict, learned."""

    before: str
    after: str
    kind: str
    path: str | None = None
    #: Of a hazard: whether the two runs overlapped (else ``after`` ran before ``before``:
    #: the build ran them out of serial order, one after the other).
    overlapped: bool = True

    def how(self, name: str) -> str:
        """How the run of ``name``, one of a hazard's two, went with the other's."""
        if self.overlapped:
            return "ran alongside"
        return "ran before" if name == self.after else "ran after"


def conflict_edges(footprints: Mapping[str, Footprint], serial: Mapping[str, int]) -> list[Edge]:
    """An edge for every conflicting pair, from the earlier to the later in serial order.
    Uses an index of written paths, so its cost follows what is written, not read."""
    writers: dict[str, set[str]] = {}
    dir_writers: dict[str, set[str]] = {}
    for name, fp in footprints.items():
        for p in fp.writes:
            writers.setdefault(p, set()).add(name)
        for d in fp.entry_dirs:
            dir_writers.setdefault(d, set()).add(name)
    pairs: dict[tuple[str, str], str] = {}

    def add(x: str, y: str, path: str) -> None:
        if x == y:
            return
        a, b = (x, y) if serial[x] < serial[y] else (y, x)
        if (a, b) not in pairs or path < pairs[(a, b)]:
            pairs[(a, b)] = path

    for name, fp in footprints.items():
        for group in (fp.reads, fp.listed, fp.writes):
            for p in group & writers.keys():
                for w in writers[p]:
                    add(w, name, p)
        for d in fp.listed & dir_writers.keys():
            for w in dir_writers[d]:
                add(w, name, d)
    return [Edge(a, b, "conflict", path) for (a, b), path in sorted(pairs.items())]


def learned_edges(raw: object, names: set[str], serial: Mapping[str, int]) -> list[Edge]:
    """Edges remembered from past hazards, among ``names``, oriented by serial order."""
    out = []
    for item in raw if isinstance(raw, list) else []:
        try:
            a, b, path = item
        except (TypeError, ValueError):
            continue
        if a in names and b in names and a != b:
            if serial[a] > serial[b]:
                a, b = b, a
            out.append(Edge(a, b, "learned", path))
    return out


def priorities(
    names: Iterable[str], edges: Iterable[Edge], durations: Mapping[str, float | None]
) -> dict[str, float]:
    """Length of the longest path from each target to the end (its own duration
    included): starting the longest chain first keeps every core busy to the end."""
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e.before, []).append(e.after)
    memo: dict[str, float] = {}

    def longest(n: str) -> float:
        if n in memo:
            return memo[n]
        memo[n] = 0.0  # guards against a cycle; edges only go forward in serial order
        own = durations.get(n) or 0.0
        memo[n] = own + max((longest(m) for m in succ.get(n, ())), default=0.0)
        return memo[n]

    return {n: longest(n) for n in names}


@dataclass
class Run:
    """One finished run in this build, for hazard checks."""

    name: str
    started: float
    finished: float
    footprint: Footprint
    #: The start as the trace tells it: ``time.time_ns()`` and on the file system's clock
    #: (:attr:`memotest.model.Trace.fs_started_ns`; 0 when unknown).
    started_ns: int = 0
    fs_started_ns: int = 0


def hazards(runs: list[Run], serial: Mapping[str, int]) -> list[Edge]:
    """Pairs that conflict and where the later one (in serial order) started before the
    earlier one finished, with the path: a serial run could have shown it other files."""
    out = []
    ordered = sorted(runs, key=lambda r: serial[r.name])
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.started < a.finished:
                start = (b.started_ns, b.fs_started_ns) if b.started_ns else None
                path = conflict(a.footprint, b.footprint, start)
                if path is not None:
                    overlapped = a.started < b.finished
                    out.append(Edge(a.name, b.name, "hazard", path, overlapped))
    return out
