"""``file``: a path by the content of what it resolves to.

What the trace yields: every path the target read, stat'ed, executed or loaded before it
wrote it (whatever it is: the fingerprint says whether it is a file, a directory or a
special file). Its digest is the xxh3-128 of the content mixed with the permission bits
and link count (``FileStates.hash_file``, ``memotest/world/observable.py``: what a ``stat`` or
an ``fstat`` of the open file shows); when the path is a symlink the link text is hashed
too, and the link is recorded, so that re-pointing a link is a change even when the new
target has the same content.

The link count is held only where the run could have seen it (:func:`nlink_seen`). A
file's link count is the number of its names anywhere on the file system: uv installs a
venv by hard-linking every file from its package cache, so the count of each installed
file is the number of venvs on the machine sharing that cache entry, and creating or
removing *any* of them moves it. The tracer sees a ``stat`` by path (``S``), not the
``fstat`` of an open descriptor (every Python ``open`` makes one, and so does ``cat``):

- a file the run stat'ed by path holds its link count (a test printing ``st_nlink``, a
  backup tool counting names);
- a file only opened, read, executed or mapped does not: reading the count through
  ``fstat`` of a descriptor is out of reach, as its mtime is for the ``order`` kind;
- a Python module or extension (``UNORDERED_SUFFIXES``) in an installed package's folder
  (``site-packages``, ``dist-packages``) does not either: the import system stats every
  module it finds and uses the size and mtime only, and those folders are what a package
  manager hard-links. A test that stats an installed module for its link count is
  replayed when only that count changed (``docs/limits.md``).

Such a digest ends in ``:*`` (``observable.without_nlink``) and matches a file with any
link count (``observable.file_digest_holds``); the content and mode still count.

Its check is the no-op build's hot path: one ``lstat`` (cached for the build), and no
hashing while the stat signature is the recorded one and was not racily clean.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import replace

from memotest.inputs.base import InputKind, refresh, type_word
from memotest.inputs.order import UNORDERED_SUFFIXES
from memotest.model import Input, Kind, StatSig, Trace
from memotest.world.fingerprint import OPEN_FLAGS, UNREADABLE, FileStates, Fingerprint, Refresh
from memotest.world.observable import (
    NLINK_UNSEEN,
    file_digest_holds,
    split_file_digest,
    without_nlink,
)

_S_ISREG = stat.S_ISREG
_S_ISLNK = stat.S_ISLNK
#: The folders of installed packages (``sysconfig``'s ``purelib``/``platlib``, Debian's).
_UNSEEN = ":" + NLINK_UNSEEN
INSTALLED = ("/site-packages/", "/dist-packages/")


def nlink_seen(path: str, trace: Trace) -> bool:
    """Whether the run could have seen the link count of the file at ``path``: it stat'ed
    it by path, and it is not a module the import system stats in an installed package."""
    if path not in trace.stats:
        return False
    return not (path.endswith(UNORDERED_SUFFIXES) and any(d in path for d in INSTALLED))


class File(InputKind):
    kind = Kind.FILE

    def observed(self, trace: Trace) -> Iterable[str]:
        written = trace.writes | trace.deleted
        probed = trace.probed  # held by what is there (``inputs/probed.py``)
        for group in (trace.reads, trace.execs, trace.loaded):
            yield from (path for path in group if path not in written)
        yield from (p for p in trace.stats if p not in written and p not in probed)

    def after_run(
        self, path: str, states: FileStates, trace: Trace
    ) -> tuple[Fingerprint, list[str]]:
        now, why = super().after_run(path, states, trace)
        if now.kind is Kind.FILE and not nlink_seen(path, trace):
            now = replace(now, digest=without_nlink(now.digest))
        return now, why

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        st = states.lstat(path)
        if st is None or st is UNREADABLE:
            return False
        if link is None and sig is not None and _S_ISREG(st.st_mode):
            # The no-op fast path, tested first: a regular file, its signature unchanged
            # and not racy (as below, in fewer steps: 20,000 files a no-op build).
            mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
            if (mtime, st.st_size, st.st_ino, ctime) == tuple(sig) and (
                mtime if mtime > ctime else ctime
            ) < verified_ns - states.racy_window_ns:
                states.known_files[path] = (digest, sig, verified_ns, link)
                return True
        if _S_ISLNK(st.st_mode):
            if states.readlink(path) != link:
                return False
            st = states.stat(path)
            if st is None or st is UNREADABLE:
                return False
        elif link is not None:
            return False
        if not _S_ISREG(st.st_mode):
            return False
        if (
            sig is not None
            and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == sig
            and max(st.st_mtime_ns, st.st_ctime_ns) < verified_ns - states.racy_window_ns
        ):
            if not digest.endswith(_UNSEEN):  # the build reuses full digests only
                states.known_files[path] = (digest, sig, verified_ns, link)
            return True
        kf = states.known_files.get(path)
        if (
            kf is not None
            and kf[3] == link
            and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == tuple(kf[1])
            and max(st.st_mtime_ns, st.st_ctime_ns) < kf[2] - states.racy_window_ns
        ):
            # Another fingerprint of this path was proven current by its signature: no
            # need to hash to know whether this one matches.
            if not file_digest_holds(digest, kf[0]):
                return False
            return refresh(states, sig, verified_ns, StatSig(*kf[1]), kf[2])
        try:
            done = states.hash_file(path)
        except OSError:
            return False
        if not file_digest_holds(digest, done.digest):
            return False
        states.known_files[path] = done
        return refresh(states, sig, verified_ns, done.sig, done.verified_ns)

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        if stat.S_ISDIR(st.st_mode):
            return "is now a directory"
        if not _S_ISREG(st.st_mode):
            return f"is now {type_word(st)}"
        old_link = recorded.link if isinstance(recorded, Fingerprint) else None
        new_link = states.readlink(recorded.path)
        if new_link != old_link:
            if new_link is None:
                return "is no longer a symlink"
            return f"link now points to {new_link}"
        try:  # can it be read at all? (no need to hash: the check said it differs)
            os.close(os.open(recorded.path, OPEN_FLAGS))
        except OSError as e:
            return f"is unreadable ({e.strerror})"
        now = states.stat(recorded.path) or st
        _content, meta = split_file_digest(recorded.digest)
        mode, nlink = f"{stat.S_IMODE(now.st_mode):o}", now.st_nlink
        if meta is not None:
            was_mode, _, was_nlink = meta.partition(":")
            if was_mode != mode:
                return f"mode changed from {was_mode} to {mode}"
            if was_nlink not in (str(nlink), NLINK_UNSEEN):
                return f"link count changed from {was_nlink} to {nlink}"
        return "content changed"


KIND = File()
