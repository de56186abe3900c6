"""A build's conflicts: the order edges that keep known ones apart, and the hazards found.

The rules are :mod:`memotest.loop.schedule`'s; this is where a build applies them. Before the
loop, :meth:`Conflicts.order_edges` turns the last records of the targets that may run
(and the edges learned from past hazards) into order edges. During it, each finished run
is noted with what it read and wrote. After it, :meth:`Conflicts.rerun_hazards` finds the
runs that overlapped where one wrote what the other observed: their results are not
kept, they run again one at a time in serial order, and the edges are remembered in the
store for the next builds. Then :meth:`Conflicts.recheck_replays` re-checks every target
replayed in this build whose recorded inputs a run of this build wrote (a stale target's
writes are unknown until it runs: an edited target may now write what a cached one
read); those that no longer hold run, after every run, and their result replaces the
replayed one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable

from memotest.check.plan import Fresh, Stale
from memotest.drive.step import Step
from memotest.inputs.entries import looked_for
from memotest.load import plugins
from memotest.loop import schedule
from memotest.model import Kind, Outcome, Target, Trace
from memotest.reporting.report import Summary
from memotest.store import Record, Store


class Conflicts:
    """The conflicts among the targets of one build (``store`` None: ``--no-cache``)."""

    def __init__(self, step: Step, store: Store | None, serial: dict[str, int]) -> None:
        self.step = step
        self.store = store
        self.serial = serial
        self.runs: list[schedule.Run] = []  # this build's runs, for the hazard check

    def order_edges(
        self, verdicts: dict[str, Fresh | Stale], records: dict[str, Record | None], runs: bool
    ) -> list[schedule.Edge]:
        """The order edges between the targets that may run in this build (none when
        nothing ``runs``: a dry run). A target may run if it is stale, or if a target that
        may run wrote something it observed last time (it is checked again after that one)."""
        maybe = {n for n, v in verdicts.items() if isinstance(v, Stale)}
        if not maybe or self.store is None or not runs:
            return []
        frontier = set(maybe)
        while frontier:
            written: set[str] = set()
            for n in frontier:
                rec = records.get(n)
                if rec is not None:
                    written.update(rec.writes)
                    written.update(os.path.dirname(w) for w in rec.writes)
            ids = self.store.fp_ids_of_paths(written)
            frontier = set()
            if ids:
                for n, rec in records.items():
                    if n in maybe or rec is None:
                        continue
                    if not ids.isdisjoint(getattr(rec.inputs, "ids", ())):
                        frontier.add(n)
            maybe |= frontier
        # Only what one of them writes (or whose folder's entries it changes) can make
        # an edge: a record that observed none of those paths gets a footprint of its
        # writes alone, without reading its inputs (thousands a pytest file).
        writes = {w for n in maybe if (r := records.get(n)) is not None for w in r.writes}
        keys = writes | {os.path.dirname(w) for w in writes}
        key_ids = self.store.fp_ids_of_paths(keys) if keys else set()
        footprints = {}
        for n in maybe:
            rec = records.get(n)
            if rec is None:
                continue
            ids = getattr(rec.inputs, "ids", None)
            inputs: Iterable[tuple[str, Kind]] = ()
            if ids is None or not key_ids.isdisjoint(ids):
                inputs = ((i.path, i.kind) for i in rec.inputs)
            footprints[n] = schedule.Footprint.of(inputs, rec.writes)
        edges = schedule.conflict_edges(footprints, self.serial)
        learned = self.store.get_meta(schedule.LEARNED_KEY)
        edges += schedule.learned_edges(learned, maybe, self.serial)
        return edges

    def note_run(self, target: Target, outcome: Outcome) -> None:
        """A finished run, with what it read and wrote (not one that left no trace or
        was interrupted)."""
        if outcome.trace is None or self.step.runner.interrupted.is_set():
            return
        footprint = self.footprint(outcome.trace, outcome)
        footprint.changed = _change_times(footprint.writes | footprint.entry_dirs)
        trace = outcome.trace
        self.runs.append(
            schedule.Run(
                target.name,
                outcome.started,
                outcome.finished,
                footprint,
                trace.started_ns,
                trace.fs_started_ns,
            )
        )

    def footprint(self, trace: Trace, outcome: Outcome) -> schedule.Footprint:
        skip = self.step.ignore.also(self.step.store_dir, outcome.workdir)
        written = {p for p in trace.writes | trace.deleted if not skip(p)}
        reads = trace.reads | trace.stats | trace.missing | trace.execs | trace.loaded
        # a folder only an exist_ok mkdir found (``Z``) is found, not looked for in vain
        missed = trace.missing - trace.found_dirs
        used = trace.reads | missed | trace.execs | trace.loaded | trace.listed
        entries: dict[str, set[str]] = {}
        for p in (trace.created or trace.writes) | trace.deleted:
            if not skip(p):
                entries.setdefault(os.path.dirname(p), set()).add(os.path.basename(p))
        return schedule.Footprint(
            reads={p for p in reads - written if not skip(p)},
            listed={p for p in trace.listed if not skip(p)},
            writes=written,
            made_dirs={p for p in written if _made_folder(trace, p)},
            found={p for p in (trace.stats | trace.found_dirs) - used - written if not skip(p)},
            entry_dirs=set(entries),
            entry_names=entries,
            looked_for=_looked_for(trace, skip),
        )

    def rerun_hazards(self, by_name: dict[str, Target], summary: Summary) -> None:
        """Finds hazards among the runs of this build; their targets run again, one at a
        time in serial order, and the edges are remembered for the next builds."""
        found = schedule.hazards(self.runs, self.serial)
        if not found or self.store is None:
            return
        summary.hazards.extend(found)
        names = sorted({n for e in found for n in (e.before, e.after)}, key=self.serial.get)
        learned = self.store.get_meta(schedule.LEARNED_KEY) or []
        known = {tuple(x[:2]) for x in learned}
        learned += [[e.before, e.after, e.path] for e in found if (e.before, e.after) not in known]
        self.store.set_meta(schedule.LEARNED_KEY, learned)
        config = self.step.config
        targets = [by_name[n] for n in names]
        plugins.call("memotest_build_start", targets=targets, config=config)
        for n in names:
            edge = next(e for e in found if n in (e.before, e.after))
            other = edge.after if n == edge.before else edge.before
            t = by_name[n]
            self.step.snapshot(t, self.store.records([n]).get(n))
            result = self.step.record(t, self.step.run(t), None, self.store)
            result.reason = f"re-run alone: {edge.how(n)} {other}, conflict on {edge.path}"
            summary.results = [r for r in summary.results if r.name != n]
            summary.results.append(result)
            self.step.report(t, result)

    def recheck_replays(self, by_name: dict[str, Target], summary: Summary) -> None:
        """Targets replayed in this build whose recorded inputs a run of it wrote, checked
        again now that every run finished: those that no longer hold run, one at a time
        in serial order, until no run writes what a replayed one read. Nothing to do (and
        nothing done) in a build where nothing ran."""
        if self.store is None or not self.runs:
            return
        written: set[str] = set()
        for run in self.runs:
            written |= run.footprint.writes | run.footprint.entry_dirs
        while written:
            paths = written | {os.path.dirname(p) for p in written}
            self.step.states.forget(paths)
            ids = self.store.fp_ids_of_paths(paths)
            replayed = [r.name for r in summary.results if r.status == "cached"]
            records = self.store.records(replayed)
            touched = [
                by_name[n]
                for n in replayed
                if n in records and not ids.isdisjoint(getattr(records[n].inputs, "ids", ()))
            ]
            written = set()
            if not touched:
                return
            verdicts = self.step.check(touched, self.store)
            stale = sorted(
                (n for n, v in verdicts.items() if isinstance(v, Stale)), key=self.serial.get
            )
            for n in stale:
                t = by_name[n]
                self.step.snapshot(t, records[n])
                outcome = self.step.run(t)
                result = self.step.record(t, outcome, verdicts[n], self.store)
                result.reason = (
                    f"replayed, then re-run: {verdicts[n].reason}, written in this build"
                )
                result.replaces = True
                summary.results = [r for r in summary.results if r.name != n]
                summary.results.append(result)
                self.step.report(t, result)
                if outcome.trace is not None:
                    fp = self.footprint(outcome.trace, outcome)
                    written |= fp.writes | fp.entry_dirs


def _made_folder(trace: Trace, path: str) -> bool:
    """Whether the run made ``path`` (its first change a creation), changed it no other
    way (no mode or time set, not deleted or renamed over), and left a folder there: what
    another run's lookup of it shows (a folder, its mode) does not change after (its
    entries are listings, its mtime is in no order)."""
    if trace.first_change.get(path) != "N" or path in trace.altered:
        return False
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _change_times(paths: set[str]) -> dict[str, tuple[int, int]]:
    """The latest change times (``mtime_ns``, ``ctime_ns``) of each path: of the path and,
    for a symbolic link, of what it points at; of its folder where it is not there (its
    removal moved them). A file's times move with its bytes, its mode, its links and a
    rename onto its name (Linux's file systems set the moved file's change time); a
    folder's with its entries. A path whose folder cannot be stat'ed either is left out
    (not known)."""
    out: dict[str, tuple[int, int]] = {}
    for path in paths:
        try:
            states = [os.lstat(path)]
        except FileNotFoundError:
            try:
                states = [os.lstat(os.path.dirname(path))]
            except OSError:
                continue
        except OSError:
            continue
        with contextlib.suppress(OSError):
            states.append(os.stat(path))
        out[path] = (max(s.st_mtime_ns for s in states), max(s.st_ctime_ns for s in states))
    return out


def _looked_for(
    trace: Trace, skip: Callable[[str], bool]
) -> dict[str, Callable[[str, str | None], bool]]:
    """The folders of the run's listings that only readers looking for certain names
    listed, in every process that listed them (as ``inputs/entries.py`` refines a
    ``list`` input), each with the test of a name against what they looked for."""
    out: dict[str, Callable[[str, str | None], bool]] = {}
    for folder in trace.listings or {}:
        matches = looked_for(trace, folder)
        if matches is not None and folder in trace.listed and not skip(folder):
            out[folder] = matches
    return out
