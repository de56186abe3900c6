"""The targets of a build on their way: waiting for their predecessors, ready, done.

A target's predecessors are its ``needs`` and the targets an order edge puts before it
(:mod:`memotest.loop.conflicts`). It leaves the waiting set once they have all finished: only
then is it checked, since a predecessor that ran may have rewritten what it reads. Ready
targets (checked and stale) start in order of urgency: those whose last run did not pass
or that never ran first, then those with the longest chain of work behind them
(:func:`memotest.loop.schedule.priorities`), then the serial order.
"""

from __future__ import annotations

from memotest.loop import schedule
from memotest.model import Target
from memotest.store import Record

#: The statuses a need may end with for the targets that need it to run.
NEED_MET = ("passed", "cached")


class BuildQueue:
    """The targets of one build, by name, with their predecessors and their state."""

    def __init__(
        self,
        targets: list[Target],
        edges: list[schedule.Edge],
        records: dict[str, Record | None],
        serial: dict[str, int],
    ) -> None:
        self.by_name = {t.name: t for t in targets}
        self.serial = serial
        self.records = records
        self.preds = {t.name: set(t.needs) & self.by_name.keys() for t in targets}
        for e in edges:
            self.preds[e.after].add(e.before)
        durations = {n: (r.duration if r else None) for n, r in records.items()}
        self.priority = schedule.priorities(self.by_name, edges, durations)
        self.waiting = set(self.by_name)
        self.ready: list[Target] = []
        self.done: dict[str, str] = {}  # name -> status
        self.ran: set[str] = set()

    def __bool__(self) -> bool:
        """Whether targets are still waiting or ready."""
        return bool(self.waiting or self.ready)

    def released(self) -> list[Target]:
        """The waiting targets whose predecessors have all finished, in serial order; they
        wait no more."""
        names = [
            n
            for n in sorted(self.waiting, key=self.serial.get)
            if self.preds[n] <= self.done.keys()
        ]
        self.waiting.difference_update(names)
        return [self.by_name[n] for n in names]

    def unmet_need(self, target: Target) -> str | None:
        """Why ``target`` cannot run (a need that did not pass), or None."""
        bad = [n for n in target.needs if self.done.get(n) not in NEED_MET]
        return f"needs {bad[0]}, which {self.done[bad[0]]}" if bad else None

    def after_a_run(self, target: Target) -> bool:
        """Whether a predecessor of ``target`` ran in this build (it is checked again)."""
        return bool(self.preds[target.name] & self.ran)

    def push(self, targets: list[Target]) -> None:
        """Makes ``targets`` ready; the ready ones are kept most urgent first."""
        self.ready.extend(targets)
        self.ready.sort(key=self.urgency)

    def urgency(self, t: Target) -> tuple[int, float, int]:
        rec = self.records.get(t.name)
        known = rec is not None and rec.status == "passed"
        return (1 if known else 0, -self.priority.get(t.name, 0.0), self.serial[t.name])

    def finish(self, name: str, status: str, ran: bool) -> None:
        self.done[name] = status
        if ran:
            self.ran.add(name)
