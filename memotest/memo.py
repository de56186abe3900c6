"""Memoize one command from inside another tool: the API the tox, nox and make adapters use.

``run_memoized`` checks the store, replays the last result if every observation still
holds, and otherwise runs the command under the tracer and records it. It holds the
store's lock only while checking and while recording, never while the command runs, so
that ``make -j`` or parallel tox envs sharing one store still run side by side.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from memotest import keys as keymod
from memotest.build import file_states
from memotest.config import Project, Settings
from memotest.model import Target
from memotest.plan import Fresh, plan
from memotest.record import make_record
from memotest.rewritten import snapshot
from memotest.runner import Runner
from memotest.store import Store

LOCK_TIMEOUT = 600.0


@dataclass
class MemoResult:
    """How a memoized command ended. ``cached`` means it was not run: ``log`` and
    ``exit_code`` are the recorded ones; ``reason`` says why it ran otherwise."""

    name: str
    status: str  # passed, failed, timeout, error
    exit_code: int | None
    cached: bool
    log: bytes
    duration: float
    reason: str | None = None
    note: str | None = None  # why a passing result was not stored as reusable
    #: The log was written to ``tee`` while the command ran (so not to be printed again).
    streamed: bool = False


def run_memoized(
    target: Target,
    *,
    root: Path,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
    unkeyed_env: Mapping[str, str] | None = None,
    force: bool = False,
    tee: BinaryIO | None = None,
) -> MemoResult:
    """Runs ``target`` unless its record in ``root/.memotest`` still holds.

    ``environ`` is the environment the command would get (default: ``os.environ``); the
    variables matching ``settings.pass_env`` are passed and are part of the key, plus the
    target's own ``env``. ``unkeyed_env`` is passed to the command without being part of
    the key: only for values that change from one invocation to the next without
    changing what the command does (a terminal's width, a random seed the tool picks).
    ``tee``: when the command runs, its output is also written there as it comes
    (``MemoResult.streamed``); a replayed log is only returned.
    """
    settings = settings or Settings()
    environ = os.environ if environ is None else environ
    project = Project(root / "memotest.toml", root, settings, {target.name: target})
    key = keymod.target_key(target, settings, environ)
    states = file_states(project)
    with Store.open(root, lock=True, lock_timeout=LOCK_TIMEOUT) as store:
        verdict = plan([target], {target.name: key}, store, states, force=force)[target.name]
        if isinstance(verdict, Fresh):
            rec = verdict.record
            store.restore_outputs(rec.outputs, target.cwd)
            log = store.read_blob(rec.log_digest) if rec.log_digest else b""
            return MemoResult(target.name, rec.status, rec.exit_code, True, log, rec.duration)
    before = snapshot(getattr(verdict, "record", None), states)
    env = keymod.run_environ(target, settings, environ)
    env.update(unkeyed_env or {})
    outcome = Runner().run(target, env, tee=tee)
    result = MemoResult(
        target.name,
        outcome.status,
        outcome.exit_code,
        False,
        outcome.log,
        outcome.duration,
        reason=verdict.reason,
        streamed=tee is not None,
    )
    if outcome.trace is None:
        return result
    with Store.open(root, lock=True, lock_timeout=LOCK_TIMEOUT) as store:
        rec = make_record(
            target,
            outcome,
            key=key,
            states=states,
            store=store,
            ignore=settings.ignore,
            root=root,
            before=before,
        )
        store.put(rec)
        store.gc_if_due()
    if not rec.cacheable and outcome.status == "passed":
        result.note = f"not cached: {rec.uncacheable_reason}"
    return result
