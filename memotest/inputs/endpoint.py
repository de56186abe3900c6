"""What the ``unserved`` and ``sink`` kinds share: an endpoint of the network (``TYPE
ADDRESS``, the input's "path"), held by a yes or no that the check asks the system again,
with no digest: nobody serves there (``unserved.py``), a datagram sink is bound there
(``sink.py``). Which of the trace's ``C`` records are such endpoints is the kind's
``pick`` (``memotest/world/network.py``), but never one a process of the tree served.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from memotest.inputs.base import InputKind
from memotest.model import Input, Trace
from memotest.world.fingerprint import NO_DIGEST, FileStates, Fingerprint, Refresh
from memotest.world.network import held_outside


class EndpointState(InputKind):
    """An endpoint held while :meth:`holds` says yes, as the run found it."""

    #: What the check says of an endpoint that no longer held right after the run (the
    #: result is then not reusable), and of one that does not hold now.
    went: str = ""
    now: str = ""

    def pick(self, record: str) -> str | None:
        """The endpoint of a trace's ``C`` record, if it is one of this kind's."""
        raise NotImplementedError

    def holds(self, endpoint: str) -> bool:
        raise NotImplementedError

    def words(self, endpoint: str) -> str:
        return endpoint

    def observed(self, trace: Trace) -> Iterable[str]:
        return held_outside(trace.connects, trace.listens, self.pick)

    def after_run(
        self, path: str, states: FileStates, trace: Trace
    ) -> tuple[Fingerprint, list[str]]:
        fp = Fingerprint(path, self.kind, NO_DIGEST)
        return fp, [] if self.holds(path) else [f"{self.words(path)}: {self.went}"]

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        return self.holds(path)

    def describe(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result | None,
        names: Sequence[str] | None,
    ) -> str | None:
        return self.now
