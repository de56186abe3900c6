"""``other``: a path that exists and is neither a file nor a directory (a fifo, a socket,
a device). The trace yields none as such: the fingerprint of an observed ``file`` says
so. It holds while such a thing is at the path; no digest.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from memotest.inputs.base import InputKind, type_word
from memotest.model import Input, Kind
from memotest.world.fingerprint import FileStates, Refresh


class Other(InputKind):
    kind = Kind.OTHER

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
        if st is None:
            return False
        mode = st.st_mode
        return (
            stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        )

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        return f"is now {type_word(st)}"


KIND = Other()
