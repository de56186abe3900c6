"""``list``: a listed directory, by its entry names.

What the trace yields: every folder the target listed, but one it created, listed and
deleted (``absent``). Its digest is the xxh3-128 of the entry names (file-system bytes)
sorted and joined by ``\\0``: exactly the bytes the store keeps in its CAS for
``explain``, so the digest is also the CAS address of the names. Entries the build
ignores (``FileStates.skip_entry``) are left out.

A folder that changed while the target ran is recorded with the names it had before the
run, when they can be told (:func:`listing_before_run`), and no signature: the next build
lists it again and compares.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence

from memotest.fingerprint import FileStates, Fingerprint, Refresh, listing_digest
from memotest.inputs.base import InputKind, changed_during_run, gained_lost, refresh, sig_holds
from memotest.model import CLOCK_SLACK_NS, Input, Kind, Trace


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
        if now.kind is Kind.LISTING and now.sig and now.sig.touched_since(trace.started_ns):
            names, change = listing_before_run(path, trace, states.skip_entry, trace.started_ns)
            if names is not None:
                digest, _ = listing_digest(os.fsencode(n) for n in names)
                now = Fingerprint(path, Kind.LISTING, digest, None, 0, None, tuple(names))
            if change:
                why.append(change)
            return now, why
        return now, why + changed_during_run(now, trace)

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
        if st is None or not stat.S_ISDIR(st.st_mode):
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
        if names is None and isinstance(recorded, Fingerprint):
            names = recorded.names
        if names is None:
            names = recorded_names(states, recorded.digest)
        current = states.listing_names(recorded.path)
        if names is None or current is None:
            return "directory entries changed"
        old, new = set(names), set(current)
        return gained_lost(sorted(new - old), sorted(old - new), "", "") or (
            "directory entries changed"
        )


def recorded_names(states: FileStates, digest: str) -> list[str] | None:
    """The entry names a listing had, from the store's CAS (where its digest names them),
    if the build can read it."""
    if states.blobs is None:
        return None
    try:
        blob = states.blobs(digest)
    except Exception:
        return None
    return [os.fsdecode(n) for n in blob.split(b"\0")] if blob else []


def listing_before_run(
    path: str, trace: Trace, skip: Callable[[str], bool] | None, started_ns: int
) -> tuple[list[str] | None, str | None]:
    """For a listed directory that changed while the target ran: the entry names it had
    before the run (what the target saw), or why that cannot be known.

    Entries the tree created itself are taken out (the target did not see them; a later
    build will see them and run it again, which is right: its own leftovers are part of
    the next run's world), and entries it deleted or replaced are put back. Any other
    entry created or changed during the run by someone else (its ctime is not older than
    the start) makes the result unusable.
    """
    try:
        names = os.listdir(path)
    except OSError as exc:
        return None, f"directory {path} could not be listed after the run: {exc.strerror}"
    first = trace.first_change

    def skipped(entry: str) -> bool:
        return skip is not None and skip(entry)

    before = [
        os.path.basename(p)
        for p, op in first.items()
        if op == "D"
        and os.path.dirname(p) == path
        and not skipped(p)
        and os.path.basename(p) not in names
    ]
    for name in names:
        entry = os.path.join(path, name)
        if skipped(entry) or first.get(entry) == "N":
            continue
        if entry not in trace.writes:
            try:
                st = os.lstat(entry)
            except OSError:
                return None, f"directory {path} changed while the target ran"
            # A folder's ctime moves when its own entries change, which this listing does
            # not show; a file's moves when it is created (or written).
            if not stat.S_ISDIR(st.st_mode) and st.st_ctime_ns >= started_ns - CLOCK_SLACK_NS:
                return None, f"{entry} appeared or changed while the target ran"
        before.append(name)
    return sorted(before), None


KIND = Listing()
