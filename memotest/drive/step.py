"""The step every target takes, whoever drives it: check, snapshot, run, record, or replay.

Both drivers go through it: ``memotest build`` (:mod:`memotest.loop.build`, many targets, some
at once) and :func:`memotest.memo.run_memoized` (one command, from inside another tool or
a plugin's loader). A :class:`Step` holds what the targets of one driver share (the
settings, the environment they are keyed by, the file-system snapshot, the runner) and
takes a target at a time:

* :meth:`Step.check`: fresh or stale (:func:`memotest.check.plan.plan`; in one batch, so that
  a no-op build validates each distinct path once);
* :meth:`Step.replay`: a fresh target's declared outputs restored, its log read back (or
  None when the store cannot give them back: a damaged blob never yields a hit, the
  target runs instead);
* :meth:`Step.snapshot`: before a stale target runs, the files its last run read and then
  rewrote, as they are now (:func:`memotest.run.rewritten.snapshot`);
* :meth:`Step.run`: the target under the tracer (``memotest_before_target`` first; a
  ``flaky`` target is tried again while it fails);
* :meth:`Step.record`: the run's record put into the store, in two parts: what it takes of
  the file system (:meth:`Step.capture`, right after the run) and the rest
  (:meth:`Step.complete`, which a build does while the next target runs);
* :meth:`Step.report`: ``memotest_after_target`` for a result (a plugin failing there
  stops nothing);
* :meth:`Step.mark_used`: the variants replayed, marked used in the store, once per build
  in one transaction (the size bound evicts the least recently used variants).

Whatever fails inside memotest once a target's command ran (reading its trace, recording,
storing, uploading) never undoes the run: the result stands, not cached, with the reason
(:meth:`Step.record`, :mod:`memotest.drive.faults`), so no caller runs it twice.

The store is an argument of each method rather than held: ``run_memoized`` holds the
store's lock only while checking and while recording, never while the command runs, so
that parallel tox envs or ``make -j`` sharing one store still run side by side.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from memotest import errors
from memotest.check import keys as keymod
from memotest.check.keys import TargetKey
from memotest.check.plan import Fresh, Stale, plan
from memotest.check.select import Selection, decide, merge_record, merge_tests
from memotest.check.shaping import granted
from memotest.drive import faults
from memotest.load import plugins
from memotest.load.config import Settings
from memotest.load.plugins import Config
from memotest.model import Outcome, Target
from memotest.recording.record import Draft, draft_record, finish_record
from memotest.reporting.report import TargetResult
from memotest.run.observe import Ignore
from memotest.run.rewritten import Before, snapshot
from memotest.run.runner import Runner
from memotest.run.testcases import TestOutcome
from memotest.run.testcases import decode as decode_tests
from memotest.store import STORE_DIR, Record, Store, StoreError
from memotest.world.fingerprint import FileStates
from memotest.world.roots import of as roots_of

#: How many times a ``flaky`` target runs before its failure stands.
FLAKY_ATTEMPTS = 3

Verdict = Fresh | Stale


@dataclass
class Pending:
    """A run's result and, until :meth:`Step.complete`, the draft of its record."""

    result: TargetResult
    draft: Draft | None = None


class Step:
    """check -> snapshot -> run -> record, or replay, for one target at a time."""

    def __init__(
        self,
        *,
        root: Path,
        settings: Settings,
        states: FileStates,
        runner: Runner,
        config: Config,
        environ: Mapping[str, str] | None = None,
        force: bool = False,
        effects: bool = False,
    ) -> None:
        self.root = root
        self.settings = settings
        self.states = states
        self.runner = runner
        self.config = config
        self.environ = os.environ if environ is None else environ
        self.force = force
        #: Whether records hold what each run left at the paths it wrote under the roots
        #: (:func:`memotest.recording.record.effects`): a memoized command's (``run_memoized``).
        self.effects = effects
        #: The roots records and keys are relative to (:mod:`memotest.world.roots`).
        self.roots = roots_of(root, settings.roots)
        self.env = keymod.env_key(settings, self.environ, self.roots)  # the same for all
        self.store_dir = str(root / STORE_DIR)
        self.ignore = Ignore(settings.ignore, str(root), [self.store_dir])
        # --whole-files (or a pool made without the finer modes) withdraws them.
        pool = getattr(runner, "pool", None)
        code_level = not getattr(config.options, "whole_files", False) and (
            pool is None or bool(getattr(pool, "code_level", True))
        )
        #: What may shape this build's records (:mod:`memotest.check.shaping`).
        self.shaping = granted(settings, code_level=code_level)
        #: ``--select tests``: a stale test file runs only the tests whose result could
        #: have changed (:mod:`memotest.check.select`); per target about to run so, which.
        choice = getattr(config.options, "select", None) or settings.select
        self.select_tests = code_level and choice == "tests"
        runner.phases = self.select_tests  # only a build that may select tests maps them
        self.selections: dict[str, Selection] = {}
        #: Per target about to run: the files its last run rewrote, as they were before.
        self.before: dict[str, dict[str, Before]] = {}
        #: Per fresh target that could not be replayed: why (it runs instead).
        self.unreplayable: dict[str, str] = {}
        #: The variants replayed and not yet marked used (:meth:`mark_used`).
        self.used: list[int] = []
        #: Called with each record put into the store (the remote's upload), if set.
        self.uploader: Callable[[Store, TargetKey, Record], None] | None = None

    def key(self, target: Target) -> TargetKey:
        return keymod.target_key(
            target, self.settings, env=self.env, shaping=self.shaping, roots=self.roots
        )

    def check(self, targets: list[Target], store: Store | None) -> dict[str, Verdict]:
        """Fresh or stale, for each target (all stale without a store: ``--no-cache``)."""
        if store is None:
            return {t.name: Stale("forced", "--no-cache") for t in targets}
        tkeys = {t.name: self.key(t) for t in targets}
        return plan(targets, tkeys, store, self.states, force=self.force)

    def replay(self, target: Target, record: Record, store: Store) -> TargetResult | None:
        """A fresh target's result, its declared outputs restored; None when they or its
        log cannot be given back as recorded (a damaged or missing blob, an output that
        cannot be written): then the target must run, and :meth:`record` says why."""
        try:
            store.restore_outputs(record.outputs, target.cwd)
            log = store.read_blob(record.log_digest) if record.log_digest else b""
            tests: list[TestOutcome] | None = None
            if record.tests_digest:
                tests = [t.as_cached() for t in decode_tests(store.read_blob(record.tests_digest))]
        except (StoreError, OSError, ValueError) as exc:
            self.unreplayable[target.name] = f"its stored result cannot be replayed: {exc}"
            return None
        if record.variant_id is not None:
            self.used.append(record.variant_id)
        return TargetResult(
            target.name, "cached", record.duration, record.exit_code, log=log, tests=tests
        )

    def mark_used(self, store: Store | None) -> None:
        """Mark the variants replayed so far used, in one transaction (a store that fails
        here only loses the order of eviction)."""
        used, self.used = self.used, []
        if store is not None and store.locked and used:
            with contextlib.suppress(StoreError, OSError):
                store.mark_used(used)

    def choose(self, target: Target, verdict: Verdict | None, store: Store | None) -> None:
        """Before a stale ``target`` runs: with ``--select tests``, which of its tests
        (:func:`memotest.check.select.decide`; all when that is not confined to some)."""
        self.selections.pop(target.name, None)
        sel = self.selection(target, verdict, store)
        if sel is not None:
            self.selections[target.name] = sel

    def selection(
        self, target: Target, verdict: Verdict | None, store: Store | None
    ) -> Selection | None:
        """The tests of ``target`` a run would run (None: all of them)."""
        if not self.select_tests or store is None or not isinstance(verdict, Stale):
            return None
        if verdict.kind not in ("input", "failed") or verdict.record is None:
            return None
        try:
            return decide(verdict.record, self.key(target), self.states, store)
        except (StoreError, OSError, ValueError):
            return None

    def snapshot(self, target: Target, last: Record | None) -> None:
        """Before ``target`` runs: what its last run rewrote, as it is now."""
        self.before[target.name] = snapshot(last, self.states, target.cwd)

    def run(
        self,
        target: Target,
        *,
        tee: BinaryIO | None = None,
        unkeyed_env: Mapping[str, str] | None = None,
    ) -> Outcome:
        """Runs ``target`` (in a worker thread of a build), retried if flaky.
        ``unkeyed_env`` is passed to the command without being part of its key."""
        errors.inject("before")
        env = keymod.run_environ(target, self.settings, self.environ)
        env.update(unkeyed_env or {})
        sel = self.selections.get(target.name)
        if sel is not None:
            env.update(sel.env())
        plugins.call("memotest_before_target", config=self.config, target=target, env=env)
        attempts = FLAKY_ATTEMPTS if "flaky" in target.tags else 1
        outcome = self.runner.run(target, env, tee=tee)
        n = 1
        while outcome.status in ("failed", "timeout") and n < attempts:
            if self.runner.interrupted.is_set():
                break
            try:
                again = self.runner.run(target, env, tee=tee)
            except Exception as exc:  # it ran once: that result stands (faults.py)
                faults.log(self.root, f"retrying {target.name}", exc)
                break
            outcome, n = again, n + 1
        outcome.attempts = n
        return outcome

    def record(
        self, target: Target, outcome: Outcome, verdict: Verdict | None, store: Store | None
    ) -> TargetResult:
        """The result of a run, its record put into ``store`` (none without a store, nor
        for a run that left no trace or was interrupted): :meth:`capture`, then
        :meth:`complete`."""
        return self.complete(self.capture(target, outcome, verdict, store), store)

    def capture(
        self, target: Target, outcome: Outcome, verdict: Verdict | None, store: Store | None
    ) -> Pending:
        """What the record of a run takes of the file system, taken now, right after the
        run (:func:`memotest.recording.record.draft_record`); the rest is :meth:`complete`'s,
        which may be done while another target runs. A partial run's record is merged
        with the last one here (the merge reads the files the unrun tests ran)."""
        reason = verdict.reason if isinstance(verdict, Stale) else None
        reason = self.unreplayable.pop(target.name, reason)
        before = self.before.pop(target.name, None)
        sel = self.selections.pop(target.name, None)
        tests = outcome.tests
        if sel is not None and tests is not None:
            tests = merge_tests(sel, tests)
        result = TargetResult(
            target.name,
            outcome.status,
            outcome.duration,
            outcome.exit_code,
            reason=outcome.error or outcome.skip_reason or reason,
            log=outcome.log,
            flaky=outcome.attempts > 1 and outcome.status == "passed",
            tests=tests,
        )
        if sel is not None and outcome.tests is not None:
            result.selected = (len(outcome.tests), len(tests or ()))
        if outcome.fault is not None:
            result.note = faults.note(
                self.root, f"reading the trace of {target.name}", outcome.fault
            )
            result.fault = True
        trace = outcome.trace
        if trace is None or self.runner.interrupted.is_set():
            return Pending(result)
        result.whole = trace.code_whole
        # What the target wrote is no longer what this build's snapshot says.
        self.states.forget(trace.writes | trace.deleted)
        if store is None:
            return Pending(result)
        key = self.key(target)
        try:
            draft = draft_record(
                target,
                outcome,
                key=key,
                states=self.states,
                store=store,
                ignore=self.ignore,
                root=self.root,
                before=before,
                services=self.settings.services,
                effects_in=self._in_roots if self.effects else None,
            )
        except Exception as exc:  # the run stands, and is never run twice (faults.py)
            return Pending(self._fault(result, target, exc))
        pending = Pending(result, draft)
        if sel is not None:
            return Pending(self.complete(pending, store, sel))
        return pending

    def complete(
        self, pending: Pending, store: Store | None, sel: Selection | None = None
    ) -> TargetResult:
        """The result of :meth:`capture`, its record finished and put into ``store``
        (:func:`memotest.recording.record.finish_record`: it reads no file whose
        fingerprint it does not check first)."""
        result, draft = pending.result, pending.draft
        if draft is None or store is None:
            return result
        try:
            rec = finish_record(draft, self.states, store)
            if sel is not None:
                rec = self.merged(sel, rec, store)
            store.put(rec)
            if self.uploader is not None:
                self.uploader(store, draft.key, rec)
        except Exception as exc:  # the run stands, and is never run twice (faults.py)
            return self._fault(result, draft.target, exc)
        if not rec.cacheable and draft.outcome.status == "passed":
            result.note = f"not cached: {rec.uncacheable_reason}"
        return result

    def _fault(self, result: TargetResult, target: Target, exc: Exception) -> TargetResult:
        result.note = faults.note(self.root, f"recording {target.name}", exc)
        result.fault = True
        return result

    def _in_roots(self, path: str) -> bool:
        """Whether ``path`` is under the project or another root (``settings.roots``): the
        tree the calling tool's commands share, whose writes a record's effects hold."""
        return self.roots.portable(path) != path

    def merged(self, sel: Selection, rec: Record, store: Store) -> Record:
        """The record of a partial run made whole (:func:`memotest.check.select.merge_record`);
        one that cannot be is not reusable, saying why."""
        merged, why = merge_record(sel, rec, self.states, store)
        if why is None:
            return merged
        why = f"a partial run could not be merged: {why}"
        reasons = "; ".join(r for r in (rec.uncacheable_reason, why) if r)
        return replace(rec, cacheable=False, uncacheable_reason=reasons)

    def report(self, target: Target, result: TargetResult) -> None:
        """``memotest_after_target`` for ``target``'s result (:meth:`report_to`)."""
        self.report_to(self.config, self.root, target, result)

    @staticmethod
    def report_to(config: Config, root: Path | None, target: Target, result: TargetResult) -> None:
        """``memotest_after_target``. A plugin that fails there (the terminal reporter
        included) does not undo the result, nor stop a build: one line on stderr, also
        added to ``result.note``; the traceback logged (:mod:`memotest.drive.faults`)."""
        try:
            errors.inject("report")
            plugins.call("memotest_after_target", config=config, target=target, result=result)
        except Exception as exc:
            where = faults.log(root, f"reporting {target.name}", exc)
            tail = f" (traceback in {where})" if where else ""
            line = f"memotest could not report {target.name}: {faults.one_line(exc)}{tail}"
            result.note = f"{result.note}; {line}" if result.note else line
            result.fault = True
            with contextlib.suppress(Exception):
                sys.stderr.write(f"memotest: error: {line}\n")
