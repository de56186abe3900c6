"""``probed``: a path that only yes-or-no probes found, by what is there.

``os.path.exists``, ``isfile``, ``isdir``, ``islink``, ``Path.exists``, ``is_file``,
``is_dir``, ``is_symlink``... ``stat`` the path and hand their caller a yes or no about
what it is. Called on a string or a plain ``pathlib`` path, with no Python trace or
profile function set, nothing but the standard library runs inside them, and the shim
writes their ``stat``s ``p`` (``memotest/worker/untimed.py``, ``_shim/PROTOCOL.md``). A
path that nothing else of the tree read, executed, loaded, looked up or stat'ed for its
size and times (``Trace.probed``) is held by what such a probe could tell: its type
after following symbolic links (the digest: ``f`` a regular file, ``d`` a folder, ``p``
a fifo, ``s`` a socket, ``b`` and ``c`` devices) and, where the path is a symbolic
link, the link's text. Its content, size, times, permission bits and link count reached
no one: an edit of such a file replays the run. pytest's collection probes every test
file (``Path.is_dir()`` in ``pytest_ignore_collect``, ``is_file()`` in its conftest
lookup) and reads none, so an edit of a test file no longer runs the collection again.

What stays out of reach (``docs/limits.md``): Python code that runs inside a probe
without being the caller's, a signal handler or a ``sys.monitoring`` callback, and
keeps what a ``stat`` it makes there shows; ``os.path.ismount``'s comparison with the
parent folder's device (a mount on a probed path that keeps its type).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence

from memotest.inputs.base import InputKind, type_word
from memotest.inputs.dir import link_change
from memotest.model import Input, Kind, Trace, changed_since
from memotest.world.fingerprint import NO_DIGEST, UNREADABLE, FileStates, Fingerprint, Refresh


def type_letter(st: os.stat_result) -> str:
    """What a probe can tell of the file ``st`` describes: its type, as one letter."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "f"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISFIFO(mode):
        return "p"
    if stat.S_ISSOCK(mode):
        return "s"
    if stat.S_ISBLK(mode):
        return "b"
    return "c" if stat.S_ISCHR(mode) else "?"


class Probed(InputKind):
    kind = Kind.PROBED

    def observed(self, trace: Trace) -> Iterable[str]:
        return trace.probed

    def after_run(
        self, path: str, states: FileStates, trace: Trace
    ) -> tuple[Fingerprint, list[str]]:
        states.forget((path,))
        st = states.stat(path)
        if st is None:
            return Fingerprint(path, Kind.ABSENT, NO_DIGEST), [
                f"{path} disappeared while the target ran"
            ]
        if st is UNREADABLE:
            raise OSError(f"cannot stat {path}")
        now = Fingerprint(path, Kind.PROBED, type_letter(st), link=states.readlink(path))
        link = states.lstat(path)
        assert link is not None and link is not UNREADABLE
        # what may have been another type when a probe found it: a file or a link made
        # anew since the run started (a folder's times move with its entries, which a
        # probe does not see: as for ``dir``, only a new link is a change there)
        seen = [] if stat.S_ISDIR(st.st_mode) else [st]
        if now.link is not None:
            seen.append(link)
        started, fs_started = trace.started_ns, trace.fs_started_ns
        for one in seen:
            if changed_since(one.st_mtime_ns, one.st_ctime_ns, started, fs_started):
                return now, [f"{path} changed while the target ran"]
        return now, []

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
        if st is None or st is UNREADABLE:
            return False
        return type_letter(st) == digest and states.readlink(path) == link

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        if type_letter(st) != recorded.digest:
            return f"is now {type_word(st)}"
        return link_change(states, recorded)


KIND = Probed()
