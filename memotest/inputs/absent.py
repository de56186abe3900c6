"""``absent``: a path that did not exist (``ENOENT``/``ENOTDIR``) when the target looked.

What the trace yields: every path the target looked for and did not find, and every
folder it created (absent just before: ``_shim/PROTOCOL.md``'s ``N``), listed and deleted,
as a temporary folder is: what it listed there it put there itself; what it depended on
is that the folder was absent. It holds while nothing is at the path; no digest.

A path the target looked for and then created itself (its first change by the tree is
``N``: absent just before the call that made it) is recorded as absent: what the run
found there is the state before it, absent, which that ``N`` proves (the tracer keeps a
lookup only when it came before the tree's first change of the path, and a lookup after
an ``N`` could only miss it if the tree removed it again, its own doing). Such a record
holds where the path is absent again: a fresh checkout, a CI job, a driver that empties
the folder (``.coverage`` made by ``coverage combine`` after ``coverage erase`` looked for
it); where the run's own leftover is there, the next run sees another state and runs.
Any other first change after a failed lookup (the path appeared in between, made by
someone else) makes the result not reusable.

A path the run missed only inside a creation that ends the same whether the path was
absent or already a directory (``os.makedirs(..., exist_ok=True)``, ``Path.mkdir(
exist_ok=True)``: the shim's ``Y``, ``Trace.missing_or``) holds while it is absent or
a directory (not a symbolic link): digest :data:`OR_DIR`. A file there (the call raises)
makes it run again; its own folder left behind replays (``docs/limits.md``).

Likewise a plain creation, which does not fail where its path is there (``O_CREAT``
without ``O_EXCL``: ``V``/``Q``; a plain ``rename`` of a non-directory: ``J``): what its
success saw is "absent, or a regular file" (:data:`OR_FILE`: one link, writable; an empty
one, :data:`OR_EMPTY_FILE`, where the open kept the bytes and the tree read the path) or
"absent, or not a directory" (:data:`OR_NOT_DIR`). Such a record holds whether the path
was absent or found so before the run (its first change ``N``, ``W`` or ``U``): the run's
own leftover replays; a folder there runs again.

A path whose first change by the tree is ``N`` had no directory entry at all when the
run looked: the creation that made it (``mkdir``, ``O_CREAT|O_EXCL``, ``symlink``,
``link``, ``mkfifo``, a Unix socket's ``bind``, or an ``O_CREAT`` the shim saw absent
through an ``lstat``) would have failed with ``EEXIST``, or followed a link, had anything
been there, a dangling symbolic link included. Such a record (digest :data:`NO_ENTRY`)
holds while ``lstat`` finds nothing: a dangling link where a lock was taken runs again,
though a lookup that follows it misses as before. Other absences are what a following
lookup saw (``stat``, ``open`` without ``O_CREAT``, ``connect``): a dangling link there
is still absent to them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence

from memotest.inputs.base import InputKind
from memotest.model import DIR_OF_BITS, Input, Kind, Trace
from memotest.world.fingerprint import NO_DIGEST, UNREADABLE, FileStates, Fingerprint, Refresh

#: The digest of an absence that a directory at the path also satisfies.
OR_DIR = "or-dir"
#: ... a directory of the permission bits after the colon (octal): what an exist_ok
#: ``mkdir`` found (the shim's ``Z``), and the folder it would have made where nothing was.
OR_DIR_OF_BITS = "or-dir:"
#: ... a regular file (writable, one link), an empty one, anything but a directory.
OR_FILE = "or-file"
OR_EMPTY_FILE = "or-empty-file"
OR_NOT_DIR = "or-not-dir"
_DIGESTS = {"dir": OR_DIR, "file": OR_FILE, "empty-file": OR_EMPTY_FILE, "not-dir": OR_NOT_DIR}
#: The digest of an absence a creation proved: no entry, not even a dangling link.
NO_ENTRY = "no-entry"


class Absent(InputKind):
    kind = Kind.ABSENT

    def observed(self, trace: Trace) -> Iterable[str]:
        yield from trace.missing
        for path in trace.listed:
            if trace.first_change.get(path) == "N" and path in trace.deleted:
                yield path

    def after_run(
        self, path: str, states: FileStates, trace: Trace
    ) -> tuple[Fingerprint, list[str]]:
        now = states.fingerprint(path, self.kind, fresh=True)
        first = trace.first_change.get(path)
        state = trace.missing_or.get(path)
        if state is not None:
            digest = _digest_of(state)
            if first is not None:
                return Fingerprint(path, Kind.ABSENT, digest), []  # as the call found it
            if digest.startswith(OR_DIR_OF_BITS):  # found as such a folder, left so
                if now.kind is Kind.ABSENT or _dir_of_bits(states.lstat(path), digest):
                    return Fingerprint(path, Kind.ABSENT, digest), []
                return now, [f"{path} changed while the target ran"]
        elif first == "N":
            digest = NO_ENTRY
        else:
            digest = NO_DIGEST
        if now.kind is Kind.ABSENT:
            return Fingerprint(path, Kind.ABSENT, digest), []
        if first == "N":
            return Fingerprint(path, Kind.ABSENT, digest), []  # as before the run
        return now, [f"{path} appeared while the target ran"]

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        if digest == OR_DIR:
            st = states.lstat(path)
            return st is None or (st is not UNREADABLE and stat.S_ISDIR(st.st_mode))
        if digest.startswith(OR_DIR_OF_BITS):
            st = states.lstat(path)
            return st is None or _dir_of_bits(st, digest)
        if digest == NO_ENTRY:
            return states.lstat(path) is None
        if digest == OR_NOT_DIR:
            st = states.lstat(path)
            return st is None or (st is not UNREADABLE and not stat.S_ISDIR(st.st_mode))
        if digest in (OR_FILE, OR_EMPTY_FILE):
            st = states.lstat(path)
            return st is None or (
                st is not UNREADABLE and _the_file(path, st, digest == OR_EMPTY_FILE)
            )
        return states.stat(path) is None

    def describe(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result | None,
        names: Sequence[str] | None,
    ) -> str | None:
        if recorded.digest == OR_DIR:
            return "appeared, not as a directory"
        if recorded.digest.startswith(OR_DIR_OF_BITS):
            bits = recorded.digest[len(OR_DIR_OF_BITS) :]
            return f"is there, not as a directory of mode {bits} (an exist_ok mkdir found one)"
        if recorded.digest == OR_NOT_DIR:
            return "is now a directory"
        if recorded.digest in (OR_FILE, OR_EMPTY_FILE):
            empty = recorded.digest == OR_EMPTY_FILE
            kind = "an empty regular file" if empty else "a regular file"
            return f"appeared, not as {kind} (one link, writable)"
        if st is None:
            return "appeared (a dangling symbolic link)"
        return "appeared"


KIND = Absent()


def _digest_of(state: str) -> str:
    if state.startswith(DIR_OF_BITS):
        return OR_DIR_OF_BITS + state[len(DIR_OF_BITS) :]
    return _DIGESTS[state]


def _dir_of_bits(st: os.stat_result | None, digest: str) -> bool:
    """A directory (not a symbolic link) with the permission bits ``digest`` names."""
    if st is None or st is UNREADABLE or not stat.S_ISDIR(st.st_mode):
        return False
    return f"{stat.S_IMODE(st.st_mode):o}" == digest[len(OR_DIR_OF_BITS) :]


def _the_file(path: str, st: os.stat_result, empty: bool) -> bool:
    """A regular file that an ``O_CREAT`` open ends on as on a missing path: one link (no
    other name sees the write), writable (no EACCES), and empty where its bytes survive."""
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_nlink == 1
        and (not empty or st.st_size == 0)
        and os.access(path, os.W_OK)
    )
