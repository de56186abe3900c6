"""``effect``: what a memoized command left at a path it wrote or deleted.

A replay redoes none of a command's writes: it returns the recorded log and status and
restores the declared outputs. When a later command reads what an earlier one wrote (the
``session.run`` calls of a nox session: ``coverage run`` writes ``.coverage.*``, ``coverage
combine`` reads them), replaying the earlier one while its files are gone breaks the later
one; and replaying one that deleted a file (``coverage erase``) while the file is back
leaves stale data where a run would have removed it. So a command recorded with its
effects (:func:`memotest.recording.record.effects`, which :func:`memotest.memo.run_memoized` asks
for) is replayed only while they are in place: every path under the roots (the project,
``settings.roots``) it wrote still holds what the run left there, and every such path it
deleted is still absent. Otherwise it runs, and
``explain`` says ``PATH: what the last run wrote is gone`` (or ``has changed``, or ``what
the last run deleted is back``).

Left out: the paths no replay has to leave in place (the run's own ``TMPDIR``, its scratch
folders, the store, the ignored paths such as ``__pycache__`` and ``.pytest_cache``), the
declared outputs (a replay restores them), and paths outside every root (a log in the
home folder, a tool's cache, a counter next to the project): a file there that one command
writes and the next reads is out of reach (``docs/limits.md``); held, such shared files
(an append-only log every command writes) would re-run each command after every other.

The digest is the state after the run: ``file:`` and the ``file`` kind's digest (content,
mode, link count; the symlink text in ``link``), checked by the ``file`` kind's check, its
stat fast path and racy-clean rule included (a file the run wrote a moment ago is
re-hashed until its times are older than the window); ``absent:``, which holds while
nothing (not even a dangling link) is at the path; ``dir:`` and the ``dir`` kind's
digest; ``other:`` for a fifo, socket or device, which holds while such a thing is there;
``section:`` and a reader's part for a file whose reader takes that part whoever read it
(a git index by its entries: a later ``git status`` decides by them, not by the stat data
it refreshes).

It is recorded beside the inputs (the state before the run) and checked with them, so the
no-op path costs one ``lstat`` per written path. A path the run looked for, did not find
and created is both: an ``absent`` input and a ``file`` effect, which cannot hold at once,
so such a command replays only from the run that found its own leftover and left it as it
found it (``rewritten.py``): a replay then leaves the file system as a run would.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from memotest.inputs import dir as dir_
from memotest.inputs import file, section
from memotest.inputs.base import InputKind
from memotest.inputs.readers import UNPARSED, reader_for
from memotest.inputs.section import part_of
from memotest.model import Input, Kind
from memotest.world.fingerprint import UNREADABLE, FileStates, Fingerprint, Refresh

#: The prefixes of the digest: what the run left at the path.
FILE, ABSENT, DIR, OTHER = "file:", "absent:", "dir:", "other:"
#: A file held by the part its reader takes whoever read it (a git index, which any later
#: ``git status`` refreshes: ``builtin/git_index.py``): what a later step decides by.
SECTION = "section:"


def after_run(path: str, states: FileStates) -> Fingerprint:
    """The effect of a run on ``path``: what is there right after it (``OSError`` when it
    cannot be read)."""
    now = states.fingerprint(path, fresh=True)
    reader = reader_for(path) if now.kind is Kind.FILE and now.link is None else None
    if reader is not None and not reader.callers:
        part = part_of(now)
        if part is not None and part != UNPARSED:
            return Fingerprint(path, Kind.EFFECT, SECTION + part, now.sig, now.verified_ns)
    prefix = {Kind.FILE: FILE, Kind.ABSENT: ABSENT, Kind.DIR: DIR}.get(now.kind, OTHER)
    return Fingerprint(
        path, Kind.EFFECT, prefix + now.digest, now.sig, now.verified_ns, link=now.link
    )


class Effect(InputKind):
    kind = Kind.EFFECT

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        if digest.startswith(FILE):
            return file.KIND.verify(states, path, digest[len(FILE) :], sig, verified_ns, link)
        if digest.startswith(SECTION):
            part = digest[len(SECTION) :]
            return section.KIND.verify(states, path, part, sig, verified_ns, link)
        if digest.startswith(DIR):
            return dir_.KIND.verify(states, path, digest[len(DIR) :], sig, verified_ns, link)
        st = states.lstat(path)
        if st is UNREADABLE:  # neither absent nor present: never holds
            return False
        if digest.startswith(ABSENT):
            return st is None
        return st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))

    def describe(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result | None,
        names: Sequence[str] | None,
    ) -> str | None:
        if recorded.digest.startswith(ABSENT):
            return "what the last run deleted is back"
        if st is None and states.lstat(recorded.path) is None:
            return "what the last run wrote is gone"
        return "what the last run wrote has changed"


KIND = Effect()
