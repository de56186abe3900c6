"""``entries``: a listed folder, by those of its entries its readers looked for.

A run forked from a warm worker, and the plain pytest process of a tox env or a nox
session (``tracer/listing_reports.py``), report the folders of the project that only
readers looking for certain names listed (the import system, ``importlib.metadata``, ``glob``,
a test collection going down to the file it collects), each with ``[names, patterns]``
(``Trace.listings``; who counts as such a reader, and what that rests on:
``memotest/worker/listings.py``). The refinement turns such a ``list`` input, when every
process that listed the folder reported it so, into an ``entries`` input: its digest
names the CAS blob of what was looked for and which entries matched
(:func:`entries_record`). A new
``py.typed`` re-runs nothing; a new module that an import would now find first re-runs
what imported it.

It holds while the stat signature is the recorded one, or else while the folder's
entries match what was looked for as they did (:func:`entries_changed`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from memotest.inputs.base import InputKind, gained_lost, refresh, sig_holds
from memotest.model import Input, Kind, Trace
from memotest.world.fingerprint import UNREADABLE, FileStates, Fingerprint, Refresh

if TYPE_CHECKING:
    from memotest.store import Store


class Entries(InputKind):
    kind = Kind.ENTRIES
    blob = True
    listing = True

    def refine(
        self, inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
    ) -> list[Fingerprint]:
        if not trace.listings:
            return inputs
        out: list[Fingerprint] = []
        for fp in inputs:
            looked = trace.listings.get(fp.path)
            if (
                looked is None
                or fp.kind is not Kind.LISTING
                or fp.names is None  # (the names it had before the run, if it changed since)
                or fp.path in trace.listed_elsewhere
            ):
                out.append(fp)
                continue
            if fp.types is None or len(fp.types) != len(fp.names):
                out.append(fp)  # the entries' types cannot be told: kept whole
                continue
            blob = entries_record(looked[0], looked[1], fp.names, fp.types)
            out.append(
                Fingerprint(fp.path, Kind.ENTRIES, store.put_blob(blob), fp.sig, fp.verified_ns)
            )
        return out

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        st = states.stat(path)
        if st is None or st is UNREADABLE or not stat.S_ISDIR(st.st_mode):
            return False
        if sig_holds(states, st, sig, verified_ns):
            return True
        if folder_changed(states, path, digest) is not None:
            return False
        listed = states.list_dir(path)
        return refresh(states, sig, verified_ns, listed.sig, listed.verified_ns)

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        if not stat.S_ISDIR(st.st_mode):
            return "is no longer a directory"
        change = folder_changed(states, recorded.path, recorded.digest)
        if change is None:
            return "changed"
        gained, lost = change
        if gained == ["?"]:
            return "its entries could not be compared"
        found = " an import or a lookup "
        return gained_lost(gained, lost, found + "finds", found + "found") or "changed"


def folder_changed(
    states: FileStates, path: str, digest: str
) -> tuple[list[str], list[str]] | None:
    """None if the folder's entries still match the ``entries`` fingerprint ``digest``,
    else the entries looked for that appeared and those that went
    (:func:`entries_changed`; ``["?"]`` appeared when it cannot be told)."""
    try:
        listed = states.list_dir(path)
    except OSError:
        return ["?"], []
    if states.blobs is None:
        return ["?"], []
    try:
        blob = states.blobs(digest)
    except Exception:
        return ["?"], []
    return entries_changed(blob, listed.names, listed.types)


def looked_for(trace: Trace, path: str) -> Callable[[str, str | None], bool] | None:
    """The test of an entry of the listed folder ``path`` against what the run's readers
    looked for there, where every process that listed it said so (the listing becomes an
    ``entries`` input); None where one listed it whole or none said."""
    looked = (trace.listings or {}).get(path)
    if looked is None or path in trace.listed_elsewhere:
        return None
    return entries_matcher(looked[0], looked[1])


def entries_matcher(
    looks: Iterable[str], patterns: Iterable[str]
) -> Callable[[str, str | None], bool]:
    """A test of an entry (its name, its type letter or None where not known): whether it
    is among ``looks`` or matches ``patterns`` (``fnmatch``; ``i:`` before a pattern:
    matched against the name in lower case; ``d:``: a directory's name, not a symbolic
    link's, any entry where the type is not known; ``m:`` SUFFIXES: a name an import
    could take for a module, with no dot, or with no dot before one of the SUFFIXES,
    separated by spaces: ``worker/listings.py``'s ``IMPORTABLE``)."""
    exact = frozenset(looks)
    plain = tuple(p for p in patterns if not p.startswith(("i:", "m:", "d:")))
    folded = tuple(p[2:] for p in patterns if p.startswith("i:"))
    folders = tuple(p[2:] for p in patterns if p.startswith("d:"))
    modules = {s for p in patterns if p.startswith("m:") for s in p[2:].split()}
    anything = any(p.startswith("m:") for p in patterns)

    def matches(name: str, kind: str | None = None) -> bool:
        if name in exact:
            return True
        if kind in (None, "d") and any(fnmatch.fnmatchcase(name, p) for p in folders):
            return True
        if anything:
            _, dot, tail = name.partition(".")
            if not dot or "." + tail in modules:
                return True
        if any(fnmatch.fnmatchcase(name, p) for p in plain):
            return True
        low = name.lower()
        return any(fnmatch.fnmatchcase(low, p) for p in folded)

    return matches


def entries_record(
    looks: Sequence[str], patterns: Sequence[str], names: Sequence[str], types: str
) -> bytes:
    """The fingerprint's content (JSON bytes): what was looked for, and which of the
    folder's entry ``names`` matched, with their type letters (``types``, in the order of
    ``names``: a matched file that became a folder is a change, as for ``list``)."""
    matches = entries_matcher(looks, patterns)
    present = sorted((n, t) for n, t in zip(names, types, strict=True) if matches(n, t))
    return json.dumps(
        {
            "looks": sorted(looks),
            "patterns": sorted(patterns),
            "present": [n for n, _t in present],
            "types": "".join(t for _n, t in present),
        }
    ).encode()


def entries_changed(
    blob: bytes, names: Sequence[str], types: str = ""
) -> tuple[list[str], list[str]] | None:
    """None if the folder's entries (``names``, their type letters ``types``) now match
    what ``blob`` (:func:`entries_record`) names, else ``(gained, lost)``: the entries
    looked for that appeared and went (one whose type changed is both)."""
    try:
        recorded = json.loads(blob)
    except ValueError:
        return ["?"], []
    matches = entries_matcher(recorded.get("looks", ()), recorded.get("patterns", ()))
    present = recorded.get("present", ())
    types_before = recorded.get("types")
    if types_before is None:  # a record from before the types were kept: names only
        now: set = {n for n in names if matches(n)}
        before: set = set(present)
    elif len(types) != len(names):
        return ["?"], []
    else:
        now = {(n, t) for n, t in zip(names, types, strict=True) if matches(n, t)}
        before = set(zip(present, types_before, strict=False))
    if now == before:
        return None
    return _names(now - before), _names(before - now)


def _names(entries: set) -> list[str]:
    """The sorted names of a set of entries (names, or (name, type letter) pairs)."""
    return sorted({e if isinstance(e, str) else e[0] for e in entries})


KIND = Entries()
