"""``dir``: a path that is a directory, stat'ed or opened but not listed.

The trace yields none as such: a path read or stat'ed is observed as a ``file``, and its
fingerprint says it is a directory. It holds while a directory with the same permission
bits (the digest, in octal) is at the path, reached the same way: a folder that became a
symbolic link to another (``link``: the link text, or None) is a change, as ``lstat``
shows it (``memotest/world/observable.py``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from memotest.inputs.base import InputKind
from memotest.model import Input, Kind
from memotest.world.fingerprint import FileStates, Fingerprint, Refresh
from memotest.world.observable import dir_digest


class Dir(InputKind):
    kind = Kind.DIR

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
        return (
            st is not None
            and stat.S_ISDIR(st.st_mode)
            and dir_digest(st, states.readlink(path)) == digest
        )

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        if not stat.S_ISDIR(st.st_mode):
            return "is no longer a directory"
        return link_change(states, recorded) or f"mode changed (now {stat.S_IMODE(st.st_mode):o})"


def link_change(states: FileStates, recorded: Input) -> str | None:
    """How a folder's path changed between a folder and a symbolic link, if it did."""
    old = recorded.link if isinstance(recorded, Fingerprint) else None
    new = states.readlink(recorded.path)
    if new == old:
        return None
    if new is None:
        return "is no longer a symlink"
    return f"is now a symlink to {new}" if old is None else f"link now points to {new}"


KIND = Dir()
