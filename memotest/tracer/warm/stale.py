"""Which paths a warm worker observed while starting are no longer as they were.

Checked before each run is forked (``worker.py``'s ``changed``), over every path the
worker's start-up observed: a few thousand with a test suite's libraries, so the loop is
:func:`startup.path_sig`'s, inline, and the ``stat`` is most of what it costs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping

from memotest.model import StatSig
from memotest.tracer.warm.startup import A_DIR


def not_as_they_were(
    snapshot: Mapping[str, StatSig | str | None], listed: frozenset[str]
) -> Iterator[tuple[str, StatSig | str | None]]:
    """Each path of ``snapshot`` whose ``path_sig(path, path in listed)`` is no longer
    the one it maps to, with what it is now."""
    stat_of, is_dir = os.stat, stat.S_ISDIR
    for p, sig in snapshot.items():
        try:
            st = stat_of(p)
        except OSError:
            if sig is not None:
                yield p, None
            continue
        if p not in listed and is_dir(st.st_mode):
            if sig != A_DIR:
                yield p, A_DIR
            continue
        now = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        if now != sig:  # a StatSig is that tuple
            yield p, StatSig(*now)
