"""What an input kind is: the one object that owns a kind's whole life.

An :class:`InputKind` says, for the recorded inputs of its kind (stored under its name,
``Kind``): which paths a trace yields as such inputs (:meth:`~InputKind.observed`), how
an input observed that way is fingerprinted right after the run and what makes the run's
result not reusable (:meth:`~InputKind.after_run`), how a coarser input of the run becomes
one of this kind when the run showed that a finer observation holds
(:meth:`~InputKind.refine`), how a recorded fingerprint is checked against the file system
(:meth:`~InputKind.verify`: the no-op build's hot path) and how ``explain`` words a change
(:meth:`~InputKind.describe`); and, as data, whether its digest names a blob of the store's
CAS and whether the scheduler counts it as a listing of its folder.

The helpers below are what several kinds share: the stat fast path, the refresh of a
signature after a re-hash that matched, a whole-file read, and the words of ``explain``.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

from memotest.model import Input, Kind, StatSig, Trace, changed_since
from memotest.world.fingerprint import UNREADABLE, FileStates, Fingerprint, Refresh, is_racy

if TYPE_CHECKING:
    from memotest.store import Store


class InputKind:
    """One kind of recorded input; each module of ``memotest/inputs/`` makes one."""

    #: The stored name (``file``, ``list``, ``code``...).
    kind: ClassVar[Kind]
    #: Whether the digest names a blob of the store's CAS (the store's GC keeps them).
    blob: ClassVar[bool] = False
    #: Whether the scheduler counts such an input as a listing of its folder: a target
    #: that creates or deletes an entry there conflicts with it.
    listing: ClassVar[bool] = False
    #: Whether the no-op check verifies this kind's fingerprints after every other one:
    #: its check may rely on the paths the other kinds' checks stat'ed (``plan.py``).
    late: ClassVar[bool] = False
    #: Whether a change is worded ``PATH: what changed`` (``plan.py``, ``explain``); False
    #: where the path is not what changed (the order's path is only its oldest file: its
    #: words name the two files whose relation flipped).
    worded_by_path: ClassVar[bool] = True

    def begin_check(self, states: FileStates) -> None:
        """A check of recorded fingerprints against ``states`` begins (``plan``): drop
        what this kind derived from the stat cache in an earlier one (the build may have
        made ``states`` forget paths since)."""

    def observed(self, trace: Trace) -> Iterable[str]:
        """The paths of ``trace`` that are inputs of this kind as traced (before any
        refinement); none for the kinds only a refinement makes."""
        return ()

    def after_run(
        self, path: str, states: FileStates, trace: Trace
    ) -> tuple[Fingerprint, list[str]]:
        """``path``, observed as this kind, fingerprinted right after the run, and why
        the result may not be reused (``states.fingerprint`` raises ``OSError``)."""
        now = states.fingerprint(path, self.kind, fresh=True)
        return now, changed_during_run(now, trace, states)

    def refine(
        self, inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
    ) -> list[Fingerprint]:
        """The inputs of a finished run, with those that the run showed to hold by less
        turned into this kind; by default as they are."""
        return inputs

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        """Whether a recorded fingerprint still holds: ``True``, ``False``, or a
        :class:`~memotest.world.fingerprint.Refresh` (holds, but was re-hashed: store the new
        signature so that the next build takes the fast path)."""
        raise NotImplementedError

    def describe(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result | None,
        names: Sequence[str] | None,
    ) -> str | None:
        """What changed, for an input that no longer holds (``st``: the path's ``stat``
        now, never :data:`~memotest.world.fingerprint.UNREADABLE`; ``names``: for a listing,
        the entry names it had, if known)."""
        if st is None:
            return "disappeared"
        return self.changed(recorded, states, st, names)

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        """:meth:`describe` for a path that exists."""
        return "changed"


def changed_during_run(
    now: Fingerprint, trace: Trace, states: FileStates | None = None
) -> list[str]:
    """Why ``now`` (taken right after the run of a path the run found) may not be what
    the target saw: it went, or it is a file changed since the run started, or (with the
    ``states`` it was taken from: their cached ``lstat``, no other call) a symbolic link
    re-pointed, or a folder whose mode or owner changed, since then
    (:func:`link_or_mode_changed`)."""
    if now.kind is Kind.ABSENT:
        return [f"{now.path} disappeared while the target ran"]
    if (
        now.kind is Kind.FILE
        and now.sig is not None
        and now.sig.touched_since(trace.started_ns, trace.fs_started_ns)
    ):
        return [f"file {now.path} changed while the target ran"]
    if states is not None and (now.link is not None or now.kind is Kind.DIR):
        return link_or_mode_changed(now, trace, states)
    return []


def link_or_mode_changed(now: Fingerprint, trace: Trace, states: FileStates) -> list[str]:
    """What the ctime of a file's own ``stat`` does not show of a change during the run:
    a symbolic link at ``now.path`` re-pointed (at an older file: the link's own ctime
    moves, the file's does not), or the mode of a folder (its ctime moves, its mtime
    does not). The tree's own changes of the path are not counted (it changed what it
    had observed: ``first_change``). A folder whose entries changed has mtime and ctime
    moved together, which its mode does not depend on: only a ctime newer than the mtime
    counts (a mode change after the last change of its entries)."""
    if now.path in trace.first_change:
        return []
    started, fs_started = trace.started_ns, trace.fs_started_ns
    if now.link is not None:
        link = states.lstat(now.path)
        if (
            link is not None
            and link is not UNREADABLE
            and changed_since(link.st_mtime_ns, link.st_ctime_ns, started, fs_started)
        ):
            return [f"symlink {now.path} changed while the target ran"]
    if now.kind is Kind.DIR:
        st = states.stat(now.path)
        if (
            st is not None
            and st is not UNREADABLE
            and st.st_ctime_ns > st.st_mtime_ns
            and changed_since(st.st_mtime_ns, st.st_ctime_ns, started, fs_started)
        ):
            return [f"folder {now.path} changed mode while the target ran"]
    return []


def sig_holds(
    states: FileStates, st: os.stat_result, sig: Sequence[int] | None, verified_ns: int
) -> bool:
    """The stat fast path: ``st`` has the recorded signature, and was not racily clean
    when it was verified."""
    return (
        sig is not None
        and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == tuple(sig)
        and max(st.st_mtime_ns, st.st_ctime_ns) < verified_ns - states.racy_window_ns
    )


def refresh(
    states: FileStates,
    old: Sequence[int] | None,
    old_verified: int,
    new: StatSig,
    new_verified: int,
) -> bool | Refresh:
    """After a re-hash that matched: a Refresh if storing the new signature helps."""
    window = states.racy_window_ns
    if old is not None and tuple(old) == new:
        if is_racy(new, old_verified, window) and not is_racy(new, new_verified, window):
            return Refresh(new, new_verified)
        return True
    return Refresh(new, new_verified)


def read_file(states: FileStates, path: str) -> tuple[bytes, StatSig, int]:
    """The bytes of the file at ``path``, the signature they were read with and the clock
    just before; read again while the file changes under the read."""
    for _attempt in range(3):
        verified = time.time_ns()
        with open(path, "rb") as f:
            before = os.fstat(f.fileno())
            data = f.read()
            after = os.fstat(f.fileno())
        if StatSig.of(before) == StatSig.of(after):
            break
    else:
        raise OSError(errno.EAGAIN, "file kept changing while it was read", path)
    states.counters.hashed[path] += 1
    return data, StatSig.of(before), verified


def regular_file(states: FileStates, path: str) -> os.stat_result | None:
    """The ``lstat`` of ``path`` if it is a regular file itself (not a symbolic link)."""
    st = states.lstat(path)
    if st is None or st is UNREADABLE or not stat.S_ISREG(st.st_mode):
        return None
    return st


def type_word(st: os.stat_result) -> str:
    """What is at a path, for ``explain``."""
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if stat.S_ISREG(st.st_mode):
        return "a regular file"
    return "a special file"


def names_phrase(label: str, names: Sequence[str], limit: int = 8) -> str:
    """``label: a, b, c and 3 more``."""
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f" and {len(names) - limit} more"
    return f"{label}: {shown}"


def gained_lost(gained: Sequence[str], lost: Sequence[str], what: str, seen: str) -> str | None:
    """``directory gained entries WHAT: ...; lost entries: ...`` (``seen``: the past
    tense of ``what`` for entries that went), or None when neither."""
    parts = []
    if gained:
        parts.append(names_phrase(f"directory gained entries{what}", gained))
    if lost:
        parts.append(
            names_phrase("lost entries" if gained else f"directory lost entries{seen}", lost)
        )
    return "; ".join(parts) or None
