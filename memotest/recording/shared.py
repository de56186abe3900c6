"""What a warm worker's start-up observed, fingerprinted once for all the runs it forks.

A run forked from a warm worker has, besides its own observations, the worker's: a
test suite's libraries, a thousand paths or more, the same for every run. Before each
fork the worker checks that every one of them is as it was when the worker started
(``tracer/warm/stale.py``): what the run inherited from the worker's memory is what the
files held then. So the record of such a path, when only the worker observed it (the
run's own events never name it), is its state at that check, not after the run: a
change during the run (by another process) does not change what the run had, and
makes the next build run the target again, since the path is then no longer as
recorded. Each path is fingerprinted after the first run that finds it unchanged
since that run started, and the fingerprint is shared by the worker's later runs while
the check before their fork finds the path with the same signature
(``Trace.forked``, ``Trace.shared``): a file whose signature is not racy against its
hash (``world/fingerprint.py``), or an absent path. A path the run itself observed (read,
stat'ed, wrote, looked up, listed: any field of its own events) is fingerprinted after
the run as before, with the check that it did not change while the run ran
(``inputs/base.py``). ``tests/test_worker_inputs_shared.py`` is the attack.
"""

from __future__ import annotations

from memotest.model import Kind, Trace
from memotest.world.fingerprint import FileStates, Fingerprint, is_racy

#: The kinds of observation whose fingerprint the signature the check before a fork
#: compares tells completely (a folder's mode is not in it, nor a listing's entries).
SHAREABLE = frozenset({Kind.FILE, Kind.ABSENT})
_UNSEEN = object()


class SharedInputs:
    """One run's view of the fingerprints its worker's runs share (none for a run that
    was not forked from a worker)."""

    def __init__(self, trace: Trace, states: FileStates) -> None:
        self.held = trace.forked
        self.own = trace.own_paths or set()
        self.cache = trace.shared if trace.shared is not None else {}
        self.window = states.racy_window_ns

    def get(self, path: str, observed: Kind) -> Fingerprint | None:
        """The worker's fingerprint of ``path`` as observed so, if it is shared and still
        the path's at this run's fork."""
        if self.held is None or path in self.own:
            return None
        got = self.cache.get((path, observed))
        if got is None or got[0] != self.held.get(path, _UNSEEN):
            return None
        return got[1]

    def put(self, path: str, observed: Kind, now: Fingerprint, changes: list[str]) -> None:
        """Shares ``now``, ``path`` fingerprinted right after this run, when that is its
        state at this run's fork: only the worker observed it, it did not change since the
        run started (``changes``), and what the check compares says all of it."""
        held = self.held
        if held is None or changes or observed not in SHAREABLE or path in self.own:
            return
        sig = held.get(path, _UNSEEN)
        if now.kind is Kind.FILE:
            if (
                now.link is not None
                or now.sig is None
                or tuple(now.sig) != sig
                or is_racy(now.sig, now.verified_ns, self.window)
            ):
                return
        elif now.kind is not Kind.ABSENT or sig is not None:
            return
        self.cache[(path, observed)] = (sig, now)
