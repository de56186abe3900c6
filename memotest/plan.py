"""Fresh or stale: which targets can replay a recorded result, and why the others can't.

A target has many recorded runs, its *variants* (:mod:`memotest.store.records`). Its
*candidates* are the variants of its current key (the same memotest, definition,
environment, and no shaping setting withdrawn), newest recorded first; the first candidate
whose inputs all hold decides. It is fresh when that run passed and was cacheable; a
holding candidate that failed or was not cacheable makes the target run (an older pass is
never replayed over a newer fail for the same state).

This is the hot path of a no-op build. Every record's inputs are fingerprint ids shared
across records, so each *distinct* fingerprint is validated once for all variants of all
targets (one ``lstat`` per path, no hashing when the stat signature is unchanged and not
racy), and a variant holds iff its id array is disjoint from the set of invalid ids
(:mod:`memotest.holds`). Only the newest candidate of each target is read and validated
first; the older candidates of the targets it did not decide are read and validated in a
second round, so a no-op build where the newest variants hold costs what one variant per
target costs. The distinct ids of each round are the union the store remembered for those
candidates (:mod:`memotest.store.unions`), and when none is invalid no id array is read.

A target is stale, in this order of precedence, when: it is ``forced``; it is tagged
``no-cache``; it has no record (``new``); no variant has its key, and the newest was made
by another memotest (``recorder``), or with another ``definition`` or ``env`` (naming the
fields and variables), or a setting that shaped what it holds was withdrawn (``settings``,
naming it: :mod:`memotest.shaping`); the holding candidate did not pass (``failed``) or
was ``uncacheable`` (with the reason the record gives; when it is not the newest
candidate, what changed for the newest comes first), or a blob its replay needs is gone
(``blob-missing``); no candidate holds, and the newest did not pass or was not cacheable
(``failed``, ``uncacheable``: as before variants, the last run's result comes first); or
an ``input`` changed. When no candidate holds, the reason is that of the candidate that
decided last (``last_used_ns``: the one replayed or recorded most recently; after a
failing edit and its revert, the older pass that was replayed, not the newer fail): its
result if it did not pass, else its first changed path in sorted order and the count (all
of them in ``Stale.changed``), and when there are several candidates, when it was
recorded. Missing declared outputs are not a reason: a hit restores them.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memotest.fingerprint import FileStates
from memotest.holds import Checker
from memotest.inputs.check import describe_change
from memotest.inputs.registry import kind_of
from memotest.keys import TargetKey
from memotest.model import Target
from memotest.shaping import withdrawn
from memotest.store import FpRow, Head, InputList, Record, Store, default_recorder, split_output

__all__ = ["STALE_KINDS", "Fresh", "Stale", "TargetKey", "describe_all", "plan"]

#: Every ``Stale.kind``.
STALE_KINDS = (
    "new",
    "forced",
    "no-cache",
    "recorder",
    "definition",
    "env",
    "settings",
    "failed",
    "uncacheable",
    "blob-missing",
    "input",
)

_MISSING = object()


@dataclass(frozen=True)
class Fresh:
    """Up to date: ``record`` is the result to replay."""

    record: Record = field(compare=False)

    @property
    def fresh(self) -> bool:
        """Always True (a convenience shared with :class:`Stale`)."""
        return True


@dataclass(frozen=True)
class Stale:
    """Must run. ``kind`` is one of :data:`STALE_KINDS`; ``reason`` is the sentence to print.

    ``path`` is the changed input (kind ``input``); ``detail`` what happened to it (or the
    changed fields/variables); ``count`` how many inputs (fields, variables) changed.
    ``record`` is the last record if any: its duration and writes help the scheduler.
    """

    kind: str
    reason: str
    path: str | None = None
    detail: str | None = None
    count: int = 0
    record: Record | None = field(default=None, compare=False, repr=False)
    #: Kind ``input``: every changed input of the run named, sorted (``explain -v``).
    changed: tuple[FpRow, ...] = field(default=(), compare=False, repr=False)

    @property
    def fresh(self) -> bool:
        """Always False (a convenience shared with :class:`Fresh`)."""
        return False


def _normalize(value: Mapping[str, Any]) -> dict[str, Any]:
    """What a mapping looks like after a round trip through the store's JSON."""
    return dict(json.loads(json.dumps(dict(value), sort_keys=True, default=str)))


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    new_n = _normalize(new)
    return sorted(
        k for k in set(old) | set(new_n) if old.get(k, _MISSING) != new_n.get(k, _MISSING)
    )


def _env_change(var: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    was, now = old.get(var, _MISSING), new.get(var, _MISSING)
    if was is _MISSING:
        return f"{var}: newly part of the key"
    if now is _MISSING:
        return f"{var}: no longer part of the key"
    if was is None:
        return f"{var}: now set"
    if now is None:
        return f"{var}: now unset"
    return f"{var}: value changed"


def _listed(names: Sequence[str], limit: int = 5) -> str:
    text = ", ".join(names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _stale_by_key(
    target: Target, key: TargetKey, rec: Record | None, force: bool, recorder: str
) -> Stale | None:
    """The reasons that need no file system access and no candidate, in order of
    precedence; ``rec`` is the newest variant, whose key is the one that differs."""
    if force:
        return Stale("forced", "forced", record=rec)
    if "no-cache" in target.tags:
        return Stale("no-cache", "tagged no-cache: always runs", record=rec)
    if rec is None:
        return Stale("new", "never run (no record)")
    if rec.recorder != recorder:
        return Stale(
            "recorder",
            f"recorded by {rec.recorder}, this is {recorder}",
            detail=rec.recorder,
            record=rec,
        )
    if rec.def_hash != key.def_hash:
        fields = _changed_keys(rec.definition, key.definition)
        reason = "definition changed" + (f": {', '.join(fields)}" if fields else "")
        return Stale(
            "definition", reason, detail=", ".join(fields) or None, count=len(fields), record=rec
        )
    if rec.env_hash != key.env_hash:
        env_new = _normalize(key.env)
        names = _changed_keys(rec.env, env_new)
        # ``=NAME``: the inherited process state (``keys.process_state``), not a variable.
        state = [n[1:] for n in names if n.startswith("=")]
        variables = [n for n in names if not n.startswith("=")]
        parts = [f"environment changed: {_listed(variables)}"] if variables else []
        if state:
            parts.append(f"the inherited process state changed: {_listed(state)}")
        reason = "; ".join(parts) or "environment changed"
        detail = "; ".join(_env_change(v, rec.env, env_new) for v in names) or None
        return Stale("env", reason, detail=detail, count=len(names), record=rec)
    gone = withdrawn(rec.shaping, key.shaping) if key.shaping is not None else []
    if gone:
        reason = f"the settings that shape records changed: {', '.join(gone)}"
        return Stale("settings", reason, detail=", ".join(gone), count=len(gone), record=rec)
    return None


def _stale_by_result(rec: Record, last: Record) -> Stale | None:
    """Why the result of ``rec`` cannot be replayed (``last``, the newest variant, is the
    scheduler's hint), or None."""
    if rec.status != "passed":
        how = {
            "failed": f"last run failed (exit code {rec.exit_code})",
            "timeout": "last run timed out",
            "error": "last run could not be carried out",
            "skipped": "last run was skipped",
        }.get(rec.status, f"last run {rec.status}")
        return Stale("failed", how, detail=rec.status, record=last)
    if not rec.cacheable:
        reason = rec.uncacheable_reason or "last run was not cacheable"
        return Stale("uncacheable", reason, detail=rec.uncacheable_reason, record=last)
    return None


def _candidates(heads: list[Head], key: TargetKey, recorder: str) -> list[int]:
    """The ids of the variants of ``key``, newest first."""
    shaping: dict[str, bool] = {}
    out = []
    for h in heads:
        if h.recorder != recorder or h.def_hash != key.def_hash or h.env_hash != key.env_hash:
            continue
        if key.shaping is not None:
            ok = shaping.get(h.shaping)
            if ok is None:
                ok = shaping[h.shaping] = not withdrawn(json.loads(h.shaping), key.shaping)
            if not ok:
                continue
        out.append(h.id)
    return out


def _ids(rec: Record) -> Any:
    inputs = rec.inputs
    if not isinstance(inputs, InputList):  # pragma: no cover - records from the store do
        raise TypeError("plan() needs records loaded by Store.records()")
    return inputs.ids


def _changed(checker: Checker, rec: Record, last: Record, others: int) -> Stale:
    """Why ``rec``, the candidate that decided last, does not hold (``others``: how many
    other candidates there are)."""
    changed = checker.invalid.intersection(_ids(rec))
    known = sorted(
        (FpRow._make(checker.rows[i]) for i in changed if i in checker.rows),
        key=lambda r: (r.path, r.kind, r.digest),
    )
    if not known:
        reason = "the record's inputs are missing from the store"
        return Stale("input", reason, count=len(changed), record=last)
    first = known[0]
    detail = checker.described.get(first.id)
    if detail is None:
        detail = describe_change(first.fingerprint(), checker.states) or "changed"
        checker.described[first.id] = detail
    reason = _worded(first.path, first.kind, detail)
    if len(changed) > 1:
        reason += f" (and {len(changed) - 1} more changed input{'s' * (len(changed) > 2)})"
    if others:
        reason += f" [the last of {others + 1} recorded variants to run, recorded {_when(rec)}]"
    return Stale(
        "input",
        reason,
        path=first.path,
        detail=detail,
        count=len(changed),
        record=last,
        changed=tuple(known),
    )


def _worded(path: str, kind: str, detail: str) -> str:
    return f"{path}: {detail}" if kind_of(kind).worded_by_path else detail


def describe_all(stale: Stale, states: FileStates) -> list[str]:
    """``path: what happened`` for every changed input of ``stale`` (``explain -v``)."""
    out = []
    for row in stale.changed:
        detail = describe_change(row.fingerprint(), states) or "changed"
        out.append(_worded(row.path, row.kind, detail))
    return out


def _validated(store: Store, checker: Checker, tried: list[Record], others: list[Record]) -> bool:
    """Validate the fingerprints of the candidates ``tried`` (their union, as the store
    remembers it) and decode their id arrays when one is invalid, and those of ``others``;
    False when a record did not decode and the damaged database was set aside."""
    union = store.union_of(tried)
    if union is None or store.input_ids(others) is None:
        return False
    checker.validate(union)
    return not checker.invalid or store.input_ids(tried) is not None


def _when(rec: Record) -> str:  # when ``rec`` was recorded, in local time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.finished_ns / 1e9))


def _decide(rec: Record, last: Record, store: Store) -> Fresh | Stale:
    """The verdict of ``rec``, a candidate whose inputs all hold."""
    stale = _stale_by_result(rec, last)
    if stale is not None:
        return stale
    digests = [
        rec.log_digest,
        rec.tests_digest,
        *(split_output(v)[0] for v in rec.outputs.values()),
    ]
    missing = next((d for d in digests if d and not store.has_blob(d)), None)
    if missing is not None:
        reason = "the stored log, outputs or test results are gone from the store"
        return Stale("blob-missing", reason, detail=missing, record=last)
    return Fresh(rec)


def plan(
    targets: Sequence[Target],
    keys: Mapping[str, TargetKey],
    store: Store,
    states: FileStates,
    *,
    force: bool = False,
    recorder: str | None = None,
) -> dict[str, Fresh | Stale]:
    """Decide for each target whether a recorded result still holds.

    ``keys`` maps each target's name to its :class:`~memotest.keys.TargetKey`. ``states``
    is the build's file-system snapshot (each path stat'ed once for all targets). Returns
    a dict in the order of ``targets``. When the store holds the build lock, fingerprints
    that had to be re-hashed (racily clean) and still held get their new signature stored
    in one transaction, so the next build takes the fast path; nothing is written when
    nothing needed it.

    Python's cyclic garbage collector is paused meanwhile: a plan makes tens of thousands
    of short-lived tuples (rows, stat results) and no cycles, and the collections they
    would trigger cost a no-op build about a sixth of its time.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _plan(targets, keys, store, states, force, recorder)
    finally:
        if paused:
            gc.enable()


def _plan(
    targets: Sequence[Target],
    keys: Mapping[str, TargetKey],
    store: Store,
    states: FileStates,
    force: bool,
    recorder: str | None,
) -> dict[str, Fresh | Stale]:
    recorder = recorder if recorder is not None else default_recorder()
    if states.blobs is None:
        states.blobs = store.read_blob  # what the digests of some kinds name
        states.local = store.roots.local
    heads = store.variant_heads(t.name for t in targets)
    used = {h.id: h.last_used_ns for hs in heads.values() for h in hs}
    cands: dict[str, list[int]] = {}
    first: set[int] = set()  # round 1: each target's newest variant and newest candidate
    for target in targets:
        hs = heads.get(target.name)
        if not hs:
            continue
        first.add(hs[0].id)
        if not force and "no-cache" not in target.tags:
            c = cands[target.name] = _candidates(hs, keys[target.name], recorder)
            first.update(c[:1])
    recs = store.variants(first, lazy=True)
    checker = Checker(store, states)
    out: dict[str, Fresh | Stale] = {}
    last: dict[str, Record] = {}
    for target in targets:
        hs = heads.get(target.name)
        newest = recs.get(hs[0].id) if hs else None
        if newest is None or not cands.get(target.name):
            stale = _stale_by_key(target, keys[target.name], newest, force, recorder)
            out[target.name] = stale or Stale("new", "never run (no record)")
            continue
        last[target.name] = newest
        out[target.name] = Stale("new", "")  # provisional: keeps the output in target order
    chosen = {cands[n][0] for n in last}
    tried, others = [recs[v] for v in chosen], [r for v, r in recs.items() if v not in chosen]
    if not _validated(store, checker, tried, others):
        return _plan(targets, keys, store, states, force, recorder)
    later: list[str] = []
    for name, newest in last.items():
        rec = recs[cands[name][0]]
        if checker.holds(rec):
            out[name] = _decide(rec, newest, store)
        else:
            later.append(name)
    if later:  # round 2: the older candidates of the targets round 1 did not decide
        recs.update(store.variants((i for n in later for i in cands[n][1:]), lazy=True))
        tried = [recs[v] for n in later for v in cands[n][1:] if v in recs]
        if not _validated(store, checker, tried, []):
            return _plan(targets, keys, store, states, force, recorder)
        for name in later:
            variants = [recs[v] for v in cands[name] if v in recs]
            holding = next((r for r in variants[1:] if checker.holds(r)), None)
            if holding is not None:
                verdict = out[name] = _decide(holding, last[name], store)
                if isinstance(verdict, Stale):  # say first what changed for the newest run
                    newer = _changed(checker, variants[0], last[name], 0)
                    when = _when(holding)
                    reason = f"{newer.reason}; the run recorded {when} holds: {verdict.reason}"
                    out[name] = replace(verdict, reason=reason)
                continue
            # The run that decided last (replayed or recorded: after a failing edit and its
            # revert, the older pass that was replayed, not the newer fail) gives the reason.
            latest = max(variants, key=lambda r: (used.get(r.variant_id or 0, 0), r.variant_id))
            out[name] = _stale_by_result(latest, last[name]) or _changed(
                checker, latest, last[name], len(variants) - 1
            )
    if checker.refresh and store.locked:
        store.refresh(checker.refresh)
    return out
