"""``list``: a listed directory, by its entry names.

What the trace yields: every folder the target listed, but one it created, listed and
deleted (``absent``). Its digest is the xxh3-128 of the entry names (file-system bytes)
sorted and joined by ``\\0``, then ``\\0\\0`` and each entry's type letter (``readdir``'s
``d_type``: a name that turns from a file into a folder or a symlink is a change):
exactly the bytes the store keeps in its CAS for ``explain``, so the digest is also the
CAS address of the entries (``memotest/world/observable.py``). Entries the build ignores
(``FileStates.skip_entry``) are left out. A listed folder that became a symbolic link to
another is a change (``link``, as for ``dir``).

A folder that changed while the target ran is recorded with the names it had before the
run, when they can be told (:func:`listing_before_run`), and no signature: the next build
lists it again and compares.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence

from memotest.inputs.base import (
    InputKind,
    changed_during_run,
    gained_lost,
    link_or_mode_changed,
    names_phrase,
    refresh,
    sig_holds,
)
from memotest.inputs.dir import link_change
from memotest.inputs.entries import looked_for
from memotest.model import Input, Kind, Trace, changed_since
from memotest.world.fingerprint import FileStates, Fingerprint, Refresh
from memotest.world.observable import listing_digest, split_listing, type_letter


class Listing(InputKind):
    kind = Kind.LISTING
    blob = True
    listing = True

    def observed(self, trace: Trace) -> Iterable[str]:
        for path in trace.listed:
            if not (trace.first_change.get(path) == "N" and path in trace.deleted):
                yield path

    def after_run(
        self, path: str, states: FileStates, trace: Trace
    ) -> tuple[Fingerprint, list[str]]:
        now = states.fingerprint(path, self.kind, fresh=True)
        why = []
        if now.kind is not Kind.LISTING and now.kind is not Kind.ABSENT:
            why.append(f"{path} was listed but is no longer a directory")
        if (
            now.kind is Kind.LISTING
            and now.sig
            and now.sig.touched_since(trace.started_ns, trace.fs_started_ns)
        ):
            got, change = listing_before_run(path, trace, states.skip_entry)
            if got is not None:
                names, types = [n for n, _t in got], "".join(t for _n, t in got)
                digest, _ = listing_digest((os.fsencode(n) for n in names), types, now.link)
                now = Fingerprint(
                    path, Kind.LISTING, digest, None, 0, now.link, tuple(names), types
                )
            if change:
                why.append(change)
            return now, why + link_or_mode_changed(now, trace, states)
        return now, why + changed_during_run(now, trace, states)

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
        if st is None or not stat.S_ISDIR(st.st_mode) or states.readlink(path) != link:
            return False
        if sig_holds(states, st, sig, verified_ns):
            return True
        try:
            listed = states.list_dir(path)
        except OSError:
            return False
        if listed.digest != digest:
            return False
        states.known_lists[path] = listed
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
        linked = link_change(states, recorded)
        if linked:
            return linked
        types = None
        if names is None and isinstance(recorded, Fingerprint):
            names, types = recorded.names, recorded.types
        if names is None:
            names, types = recorded_entries(states, recorded.digest)
        current = states.listing_names(recorded.path)
        if names is None or current is None:
            return "directory entries changed"
        old, new = set(names), set(current)
        gained = gained_lost(sorted(new - old), sorted(old - new), "", "")
        if gained or types is None:
            return gained or "directory entries changed"
        now = dict(zip(current, states.list_dir(recorded.path).types, strict=False))
        retyped = sorted(n for n, t in zip(names, types, strict=False) if now.get(n, t) != t)
        if retyped:
            return names_phrase("entries changed type", retyped)
        return "directory entries changed"


def recorded_entries(states: FileStates, digest: str) -> tuple[list[str] | None, str | None]:
    """The entry names a listing had and their type letters, from the store's CAS (where
    its digest names them), if the build can read it."""
    if states.blobs is None:
        return None, None
    try:
        blob = states.blobs(digest)
    except Exception:
        return None, None
    return split_listing(blob)


def listing_before_run(
    path: str, trace: Trace, skip: Callable[[str], bool] | None
) -> tuple[list[tuple[str, str]] | None, str | None]:
    """For a listed directory that changed while the target ran: the entries it had before
    the run (what the target saw: names and type letters, sorted), or why that cannot be
    known.

    Entries the tree created itself are taken out (the target did not see them; a later
    build will see them and run it again, which is right: its own leftovers are part of
    the next run's world), and entries it deleted or replaced are put back. Any other
    entry created or changed during the run by someone else (its ctime is not older than
    the start) makes the result unusable.
    """
    first = trace.first_change
    try:
        names = os.listdir(path)
    except OSError as exc:
        return None, f"directory {path} could not be listed after the run: {exc.strerror}"

    def skipped(entry: str) -> bool:
        return skip is not None and skip(entry)

    unlooked = unlooked_names(path, trace)

    def aside(entry: str) -> bool:
        """An entry the build ignores, or one no reader of this listing looked for."""
        return skipped(entry) or unlooked(os.path.basename(entry))

    # Changed, and not by the tree: by someone else, who may have deleted or renamed
    # away an entry (which leaves no trace in what is there now), unless an entry the
    # build ignores changed (another target's import made ``__pycache__``), or one that
    # no reader of this listing looked for (another target's pytest-benchmark made
    # ``.benchmarks`` beside the modules an import looks for): that is taken as the
    # change (a deletion at the same time is not seen, docs/limits.md).
    by_tree = path in first or any(os.path.dirname(p) == path for p in first)
    if not by_tree and not any(aside_changed(os.path.join(path, n), trace, aside) for n in names):
        return None, f"directory {path} changed while the target ran"

    # An entry the tree deleted first and did not put back: its type is unknown ("?"),
    # but such a run is not reusable anyway (it deleted a file it did not create).
    before = [
        (os.path.basename(p), "?")
        for p, op in first.items()
        if op == "D"
        and os.path.dirname(p) == path
        and not skipped(p)
        and os.path.basename(p) not in names
    ]
    folders_changed = {os.path.dirname(p) for p in first if p.startswith(path)}
    for name in names:
        entry = os.path.join(path, name)
        if skipped(entry) or first.get(entry) == "N":
            continue
        try:
            st = os.lstat(entry)
        except OSError:
            return None, f"directory {path} changed while the target ran"
        # A file's ctime moves when it is created, renamed or written; a folder's too,
        # and when its own entries change, which this listing does not show: the tree's
        # changes in it are not counted, anyone else's are (the folder may be one renamed
        # in, and that cannot be told from its entries changing).
        if (
            entry not in trace.writes
            and changed_since(0, st.st_ctime_ns, trace.started_ns, trace.fs_started_ns)
            and not (stat.S_ISDIR(st.st_mode) and entry in folders_changed)
            and not unlooked(name)
        ):
            return None, f"{entry} appeared or changed while the target ran"
        before.append((name, type_letter(st.st_mode)))
    return sorted(before, key=lambda e: os.fsencode(e[0])), None


def unlooked_names(path: str, trace: Trace) -> Callable[[str], bool]:
    """A test of an entry name of the listed folder ``path``: whether no reader of the
    listing looked for it, under any type (every process that listed the folder reported
    what it looked for, ``inputs/entries.py``; an entry matched by none of that is not in
    the ``entries`` record it becomes). Where one listed it whole: no name."""
    matches = looked_for(trace, path)
    if matches is None:
        return lambda _name: False
    return lambda name: not matches(name, None)


def aside_changed(entry: str, trace: Trace, aside: Callable[[str], bool]) -> bool:
    """Whether ``entry`` is one set aside (ignored by the build, or looked for by no
    reader of the listing), created or changed during the run."""
    if not aside(entry):
        return False
    try:
        st = os.lstat(entry)
    except OSError:
        return False
    return changed_since(0, st.st_ctime_ns, trace.started_ns, trace.fs_started_ns)


KIND = Listing()
