"""From a finished run's observations to its record: the inputs fingerprinted right after
the run, refined to the finest kind the run showed, the log and declared outputs put into
the store's CAS, and whether the result may be reused.

Besides what the trace shows (``observe.py``), a result is not reusable when an input
changed while the target ran (its mtime is not older than the run's start; each kind says
what that means for it, ``memotest/inputs/``), when a file it read and then wrote is not
as it was before the run (``rewritten.py``), or when a declared output is missing.

A record made with ``effects`` (a memoized command: :func:`memotest.memo.run_memoized`)
also holds what the run left at each path it wrote or deleted (:func:`effects`,
``inputs/effect.py``), checked with the inputs: a replay redoes no write, so it is given
only while they are in place.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memotest.check.keys import TargetKey
from memotest.check.shaping import used
from memotest.inputs import effect
from memotest.inputs.base import InputKind
from memotest.inputs.matches import declared
from memotest.inputs.registry import kind_of, refine
from memotest.load import plugins
from memotest.model import Kind, Outcome, Target
from memotest.recording.parts import parts_blob
from memotest.recording.shared import SharedInputs
from memotest.run.observe import Ignore, observe
from memotest.run.rewritten import Before, rewritten_as_before
from memotest.run.testcases import encode as encode_tests
from memotest.store import STORE_DIR, Record, Store, output_value
from memotest.tracer.fold import is_pseudo
from memotest.world.fingerprint import FileStates, Fingerprint


@dataclass
class Draft:
    """What a record takes of the file system, taken right after the run
    (:func:`draft_record`): everything :func:`finish_record` adds reads no path whose
    fingerprint it does not check first, so that it may be done while the next target
    runs."""

    target: Target
    outcome: Outcome
    key: TargetKey
    #: The observed inputs, fingerprinted: what the kinds refine.
    inputs: list[Fingerprint]
    #: The inputs no kind refines (declared, the effects), added after.
    extra: list[Fingerprint]
    effects: list[Fingerprint]
    why: list[str]
    outputs: dict[str, str]
    writes: list[str]
    rewritten: list[str]
    dropped: bool


def draft_record(
    target: Target,
    outcome: Outcome,
    *,
    key: TargetKey,
    states: FileStates,
    store: Store,
    ignore: Sequence[str] | Ignore,
    root: Path,
    before: Mapping[str, Before] | None = None,
    services: Sequence[str] = (),
    effects_in: Callable[[str], bool] | None = None,
) -> Draft:
    """The part of a record that looks at the file system: the inputs fingerprinted as
    they are right after the run, the declared inputs and outputs, the effects. Until it
    is done nothing that could change them may start (``loop/build.py``).
    ``before``: the files the target's last record rewrote, fingerprinted before this run
    (:func:`snapshot`). ``services``: the endpoints the user declared (``settings.services``).
    ``effects_in``: record what the run left at the paths it wrote for which it is true
    (:func:`effects`)."""
    assert outcome.trace is not None
    trace = outcome.trace
    if not isinstance(ignore, Ignore):
        ignore = Ignore(ignore, str(root))
    skip = ignore.also(str(root / STORE_DIR), outcome.workdir, *outcome.scratch)
    obs = observe(trace, skip, services=services)
    dropped = False
    if plugins.manager().hook.memotest_is_input.get_hookimpls():
        n = len(obs.inputs)
        obs.inputs = [
            (path, observed)
            for path, observed in obs.inputs
            if plugins.call("memotest_is_input", path=path, target=target) is not False
        ]
        dropped = len(obs.inputs) < n
    why = list(obs.uncacheable)
    inputs = []
    kinds: dict[Kind, InputKind] = {}
    shared = SharedInputs(trace, states)  # a warm worker's start-up, once for its runs
    for path, observed in obs.inputs:
        known = shared.get(path, observed)
        if known is not None:
            inputs.append(known)
            continue
        if _links_into_kernel_fs(path, states):
            continue  # /etc/mtab -> /proc/self/mounts: a kernel file system, never an input
        kind = kinds.get(observed)
        if kind is None:
            kind = kinds[observed] = kind_of(observed)
        try:
            fp, changes = kind.after_run(path, states, trace)
        except OSError as exc:
            why.append(f"cannot fingerprint {path}: {exc.strerror or exc}")
            continue
        why.extend(changes)
        inputs.append(fp)
        shared.put(path, observed, fp, changes)
    for path in obs.rewritten:
        held = rewritten_as_before(path, states, before or {}, trace)
        if isinstance(held, str):
            why.append(held)
        else:
            inputs.append(held)
    extra, cannot = declared(target.cwd, target.inputs, states)  # globs, folders expanded
    why.extend(cannot)
    outputs: dict[str, str] = {}
    if outcome.status == "passed":
        for rel in target.outputs:
            path = os.path.join(target.cwd, rel)
            if os.path.isfile(path):
                executable = bool(os.stat(path).st_mode & 0o111)
                outputs[rel] = output_value(store.put_file(path), executable)
            else:
                why.append(f"declared output {rel} was not created")
    done: list[Fingerprint] = []
    if effects_in is not None:
        done, cannot = effects([p for p in obs.writes if effects_in(p)], target, states)
        why.extend(cannot)
    return Draft(
        target, outcome, key, inputs, extra, done, why, outputs, obs.writes, obs.rewritten, dropped
    )


def finish_record(draft: Draft, states: FileStates, store: Store) -> Record:
    """The record of a :class:`Draft`: its inputs refined (a kind that reads a file again
    reads it only while its signature is the fingerprint's), the per-test map, the log and
    the tests' results put into the store's CAS."""
    target, outcome, key, why = draft.target, draft.outcome, draft.key, draft.why
    trace = outcome.trace
    assert trace is not None
    inputs = refine(draft.inputs, trace, states, store)
    inputs.extend(draft.extra)
    parts = parts_blob(trace, inputs, states, store) if trace.phases else None
    inputs.extend(draft.effects)
    return Record(
        name=target.name,
        status=outcome.status,
        def_hash=key.def_hash,
        definition=key.definition,
        env_hash=key.env_hash,
        env=key.env,
        exit_code=outcome.exit_code,
        duration=outcome.duration,
        started_ns=trace.started_ns,
        finished_ns=trace.finished_ns,
        cacheable=not why,
        uncacheable_reason="; ".join(why[:3]) + (f" (+{len(why) - 3} more)" if len(why) > 3 else "")
        if why
        else None,
        inputs=inputs,
        writes=draft.writes,
        log_digest=store.put_blob(outcome.log),
        outputs=draft.outputs,
        rewritten=draft.rewritten,
        shaping=used(key.shaping or frozenset(), inputs, dropped=draft.dropped),
        tests_digest=(
            store.put_blob(encode_tests(outcome.tests)) if outcome.tests is not None else None
        ),
        parts=parts,
    )


def effects(
    writes: Sequence[str], target: Target, states: FileStates
) -> tuple[list[Fingerprint], list[str]]:
    """What the run left at each path it wrote or deleted (``writes``: the trace's under the
    roots, without the store, the run's own ``TMPDIR``, its scratch folders and the ignored
    paths, such as ``__pycache__`` and ``.pytest_cache``, which no replay has to leave in
    place), but its declared outputs, which a replay restores; and why the result may not
    be reused (a written path that cannot be read)."""
    outputs = {os.path.normpath(os.path.join(target.cwd, rel)) for rel in target.outputs}
    out: list[Fingerprint] = []
    why: list[str] = []
    for path in writes:
        if path in outputs:
            continue
        try:
            out.append(effect.after_run(path, states))
        except OSError as exc:
            why.append(f"cannot fingerprint what it wrote at {path}: {exc.strerror or exc}")
    return out, why


def _links_into_kernel_fs(path: str, states: FileStates) -> bool:
    st = states.lstat(path)
    if st is None or not stat.S_ISLNK(st.st_mode):
        return False
    return is_pseudo(os.path.realpath(path))
