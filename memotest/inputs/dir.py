"""``dir``: a path that is a directory, stat'ed or opened but not listed.

The trace yields none as such: a path read or stat'ed is observed as a ``file``, and its
fingerprint says it is a directory. It holds while a directory is at the path; no digest.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from memotest.fingerprint import FileStates, Refresh
from memotest.inputs.base import InputKind
from memotest.model import Input, Kind


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
        return st is not None and stat.S_ISDIR(st.st_mode)

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        return None if stat.S_ISDIR(st.st_mode) else "is no longer a directory"


KIND = Dir()
