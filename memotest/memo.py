"""Memoize one command from inside another tool: the API the tox, nox and make adapters use.

``run_memoized`` checks the store, replays the last result if every observation still
holds, and otherwise runs the command under the tracer and records it: the same
:class:`~memotest.drive.step.Step` as a build's targets, with the same target hooks. It holds
the store's lock only while checking and while recording, never while the command runs,
so that ``make -j`` or parallel tox envs sharing one store still run side by side.

A damaged store is handled as a build handles it (:mod:`memotest.store.damage`): set
aside, and the command runs. Once the command ran, nothing memotest does raises: a failure
to read its trace, record or report it leaves its result returned, not cached, with the
reason in ``note`` (:mod:`memotest.drive.faults`). So an exception out of :func:`run_memoized`
means the command did not start, and a caller may run it some other way, once.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from memotest.check import keys
from memotest.check.plan import Fresh, Stale
from memotest.drive import faults
from memotest.drive.step import Pending, Step
from memotest.errors import UsageError
from memotest.load import plugins
from memotest.load.config import Project, Settings
from memotest.load.plugins import Config
from memotest.model import Outcome, Target
from memotest.remote import open_remote
from memotest.reporting.report import TargetResult
from memotest.run.observe import file_states
from memotest.run.runner import Runner
from memotest.run.signals import uniform_terminal_signals
from memotest.store import Record, Store
from memotest.tracer.warm.pool import WorkerPool
from memotest.tracer.warm.spec import WarmSpec

if TYPE_CHECKING:
    # Imported where a remote is used (http.client, ssl): every memoized collection of the
    # pytest plugin and every tox, nox and make driver goes through here.
    from memotest.remote import RemoteCache

LOCK_TIMEOUT = 600.0


@dataclass
class MemoResult:
    """How a memoized command ended. ``cached`` means it was not run: ``log`` and
    ``exit_code`` are the recorded ones; ``reason`` says why it ran otherwise."""

    name: str
    status: str  # passed, failed, timeout, error, skipped (memotest.run.runner)
    exit_code: int | None
    cached: bool
    log: bytes
    duration: float
    reason: str | None = None
    note: str | None = None  # why a passing result was not stored as reusable
    #: memotest itself failed after the command ran: ``note`` says how (shown always).
    fault: bool = False
    #: The log was written to ``tee`` while the command ran (so not to be printed again).
    streamed: bool = False
    #: Why the command said it skipped (``status`` skipped: :mod:`memotest.run.runner`).
    skip_reason: str | None = None
    #: The recorded run that was replayed (``cached``), as the store read it.
    record: Record | None = None
    #: The definition and environment hashes of the key checked (and recorded under).
    key_hashes: tuple[str, str] | None = None


def run_memoized(
    target: Target,
    *,
    root: Path,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
    unkeyed_env: Mapping[str, str] | None = None,
    force: bool = False,
    tee: BinaryIO | None = None,
    pool: WorkerPool | None = None,
    defer: list[Callable[[Store | None], None]] | None = None,
) -> MemoResult:
    """Runs ``target`` unless its record in ``root/.memotest`` still holds.

    ``environ`` is the environment the command would get (default: ``os.environ``); the
    variables matching ``settings.pass_env`` are passed and are part of the key, plus the
    target's own ``env``. ``unkeyed_env`` is passed to the command without being part of
    the key: only for values that change from one invocation to the next without
    changing what the command does (a terminal's width, a random seed the tool picks).
    ``tee``: when the command runs, its output is also written there as it comes
    (``MemoResult.streamed``); a replayed log is only returned. ``pool``: the warm
    workers to fork a target that declares ``warm`` modules from (a build's, while it
    loads its targets); without one, such a target gets a worker of its own, stopped
    once the command is done. ``defer``: a run's record is taken of the file system at
    once (``Step.capture``), and finished by the function appended there, which a build
    calls with its store once its first targets started (``Build.run``; None: it opens
    the store).
    """
    settings = settings or Settings()
    uniform_terminal_signals()  # as a build: nohup's SIGHUP is not seen by the run, nor keyed
    project = Project(root / "memotest.toml", root, settings, {target.name: target})
    # No command line here: the hooks get a configuration of their own, with no options.
    config = Config(argparse.Namespace(), plugins.manager())
    # A target that declares warm modules (a test framework's collection) is forked from a
    # worker: what the run reports makes its Python files inputs by the code it ran.
    own_pool = WorkerPool(config=config) if target.warm and pool is None else None
    pool = pool or own_pool
    step = Step(
        root=root,
        settings=settings,
        states=file_states(project),
        runner=Runner(pool=pool),
        config=config,
        environ=environ,
        force=force,
        # A later command of the calling tool may read what this one wrote: replayed only
        # while what it wrote and deleted is in place (memotest/inputs/effect.py).
        effects=True,
    )
    remote = _remote(settings)
    if remote is not None:
        step.uploader = remote.upload
    try:
        later = defer if remote is None else None  # a remote closes when this returns
        return _replay_or_run(step, target, root, tee, unkeyed_env, remote, later)
    except KeyboardInterrupt:
        if remote is not None:
            remote.abort()  # Ctrl-C: no wait for the upload
        raise
    finally:
        # After the command: a failure here must not turn its result into an exception.
        try:
            if remote is not None and not remote.aborted:
                remote.close()  # the upload joined (remote_timeout at most)
            if own_pool is not None:
                own_pool.close()
        except Exception as exc:
            faults.log(root, f"closing after {target.name}", exc)


def _remote(settings: Settings) -> RemoteCache | None:
    """The remote cache of ``MEMOTEST_REMOTE`` or ``settings.remote``, as a build's
    (read-only with ``MEMOTEST_REMOTE_READ_ONLY=1``); one it cannot use is warned about
    and left out, since the calling tool has no command line of memotest's to fix."""
    try:
        return open_remote(argparse.Namespace(), settings, os.environ)
    except UsageError as exc:
        sys.stderr.write(f"memotest: warning: {exc}; going on without the remote\n")
        return None


def _replay_or_run(
    step: Step,
    target: Target,
    root: Path,
    tee: BinaryIO | None,
    unkeyed_env: Mapping[str, str] | None,
    remote: RemoteCache | None = None,
    defer: list[Callable[[Store | None], None]] | None = None,
) -> MemoResult:
    with Store.open(root, lock=True, lock_timeout=LOCK_TIMEOUT, roots=step.roots) as store:
        verdict = step.check([target], store)[target.name]
        if remote is not None and isinstance(verdict, Stale):
            from memotest.remote.fetch import fetch

            verdict = fetch(remote, step, store, [target], {target.name: verdict}).get(
                target.name, verdict
            )
        if isinstance(verdict, Fresh):
            rec = verdict.record
            replayed = step.replay(target, rec, store)
            step.mark_used(store)
            if replayed is not None:
                step.report(target, replayed)
                return MemoResult(
                    target.name,
                    rec.status,
                    rec.exit_code,
                    True,
                    replayed.log,
                    rec.duration,
                    record=rec,
                )
        # With the store open: the last record's inputs are read from it lazily.
        step.snapshot(target, verdict.record)
    reason = step.unreplayable.get(target.name) or verdict.reason
    outcome = step.run(target, tee=tee, unkeyed_env=unkeyed_env)
    # The command ran: from here on, nothing raises (memotest.drive.faults).
    try:
        result = _record(step, target, outcome, verdict, root, defer)
    except Exception as exc:
        result = _standing(outcome, faults.note(root, f"recording {target.name}", exc))
    if result is None:  # finished later (defer): reported then
        result = TargetResult(target.name, outcome.status, outcome.duration, outcome.exit_code)
    else:
        step.report(target, result)
    return MemoResult(
        target.name,
        outcome.status,
        outcome.exit_code,
        False,
        outcome.log,
        outcome.duration,
        reason=reason,
        note=result.note,
        fault=result.fault,
        streamed=tee is not None,
        skip_reason=outcome.skip_reason,
        key_hashes=_hashes(step, target),
    )


def _hashes(step: Step, target: Target) -> tuple[str, str] | None:
    try:
        key = step.key(target)
    except Exception:  # only an optimisation's hint (memotest-sh's stamps)
        return None
    return key.def_hash, key.env_hash


def _record(
    step: Step,
    target: Target,
    outcome: Outcome,
    verdict: Fresh | Stale,
    root: Path,
    defer: list[Callable[[Store | None], None]] | None = None,
) -> TargetResult | None:
    """The run's result, recorded in the store if it can be: a store that cannot be
    opened again, or fails while recording, leaves the result standing, not cached.
    With ``defer``, the record is only taken of the file system here; None."""
    if outcome.trace is None:
        return step.record(target, outcome, verdict, None)
    with Store.open(root, lock=True, lock_timeout=LOCK_TIMEOUT, roots=step.roots) as store:
        if defer is not None:
            pending = step.capture(target, outcome, verdict, store)
            defer.append(functools.partial(_finish, step, target, pending, outcome, root))
            return None
        result = step.record(target, outcome, verdict, store)
        # Housekeeping: the next call does it if this one fails.
        with contextlib.suppress(Exception):
            store.gc_if_due(step.settings.max_size)
        return result


def _finish(
    step: Step, target: Target, pending: Pending, outcome: Outcome, root: Path, store: Store | None
) -> None:
    """A record taken by :func:`_record` with ``defer``, finished into ``store`` (a build's,
    which holds the lock; None: the store opened here), and the result reported."""
    try:
        if store is not None:
            result = step.complete(pending, store)
        else:
            with Store.open(root, lock=True, lock_timeout=LOCK_TIMEOUT, roots=step.roots) as own:
                result = step.complete(pending, own)
    except Exception as exc:
        result = _standing(outcome, faults.note(root, f"recording {target.name}", exc))
    step.report(target, result)


def _standing(outcome: Outcome, note: str) -> TargetResult:
    """The result of a run memotest failed to record: the command's own, not cached."""
    return TargetResult(
        outcome.target.name,
        outcome.status,
        outcome.duration,
        outcome.exit_code,
        reason=outcome.error,
        log=outcome.log,
        note=note,
        fault=True,
    )


def after_target(
    config: Config, target: Target, result: TargetResult, root: Path | None = None
) -> None:
    """``memotest_after_target``, as a build fires it (:meth:`Step.report`: a plugin that
    fails there does not undo the result)."""
    Step.report_to(config, root, target, result)


def start_worker_early(
    pool: WorkerPool, target: Target, settings: Settings, config: Config
) -> None:
    """Starts in the background the warm worker that ``target`` would fork from in a build
    whose settings are ``settings`` (its environment made as :meth:`Step.run` makes it),
    for a loader that knows what its targets will be like before it has their list
    (``memotest_pytest/early.py``). Nothing when it would fork from none."""
    if not target.warm:
        return
    env = keys.run_environ(target, settings, os.environ)
    plugins.call("memotest_before_target", config=config, target=target, env=env)
    spec = WarmSpec.of(target.argv, target.warm, target.cwd, env, target.prepare)
    if spec is not None:
        pool.start_early(spec)
