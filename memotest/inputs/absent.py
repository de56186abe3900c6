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
exist_ok=True)``: the shim's ``Y``, ``Trace.missing_or_dir``) holds while it is absent or
a directory (not a symbolic link): digest :data:`OR_DIR`. A file there (the call raises)
makes it run again; its own folder left behind replays (``docs/limits.md``).

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
from memotest.model import Input, Kind, Trace
from memotest.world.fingerprint import NO_DIGEST, UNREADABLE, FileStates, Fingerprint, Refresh

#: The digest of an absence that a directory at the path also satisfies.
OR_DIR = "or-dir"
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
        if path in trace.missing_or_dir:
            digest = OR_DIR
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
        if digest == NO_ENTRY:
            return states.lstat(path) is None
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
        if st is None:
            return "appeared (a dangling symbolic link)"
        return "appeared"


KIND = Absent()
