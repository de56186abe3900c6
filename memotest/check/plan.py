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
(:mod:`memotest.check.holds`). Only the newest candidate of each target is read and validated
first; the older candidates of the targets it did not decide are read and validated in a
second round, so a no-op build where the newest variants hold costs what one variant per
target costs. The distinct ids of each round are the union the store remembered for those
candidates (:mod:`memotest.store.unions`), and when none is invalid no id array is read.

A target is stale, in this order of precedence, when: it is ``forced``; it is tagged
``no-cache``; it has no record (``new``); no variant has its key, and the newest was made
by another memotest (``recorder``), or with another ``definition`` or ``env`` (naming the
fields and variables), or a setting that shaped what it holds was withdrawn (``settings``,
naming it: :mod:`memotest.check.shaping`); the holding candidate did not pass (``failed``) or
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
from collections.abc import Mapping, Sequence
from dataclasses import replace

from memotest.check.holds import Checker
from memotest.check.keys import TargetKey
from memotest.check.shaping import withdrawn
from memotest.check.verdict import (
    STALE_KINDS,
    Fresh,
    Stale,
    describe_all,
    recorded_when,
    stale_by_key,
    stale_by_result,
    why_changed,
)
from memotest.model import Target
from memotest.store import Head, Record, Store, default_recorder, split_output
from memotest.world.fingerprint import FileStates

__all__ = ["STALE_KINDS", "Fresh", "Stale", "TargetKey", "describe_all", "plan"]


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


def _validated(store: Store, checker: Checker, tried: list[Record], others: list[Record]) -> bool:
    """Validate the fingerprints of the candidates ``tried`` (their union, as the store
    remembers it) and decode their id arrays when one is invalid, and those of ``others``;
    False when a record did not decode and the damaged database was set aside."""
    union = store.union_of(tried)
    if union is None or store.input_ids(others) is None:
        return False
    checker.validate(union)
    return not checker.invalid or store.input_ids(tried) is not None


def _decide(rec: Record, last: Record, store: Store) -> Fresh | Stale:
    """The verdict of ``rec``, a candidate whose inputs all hold."""
    stale = stale_by_result(rec, last)
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

    ``keys`` maps each target's name to its :class:`~memotest.check.keys.TargetKey`. ``states``
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
            stale = stale_by_key(target, keys[target.name], newest, force, recorder)
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
                    newer = why_changed(checker, variants[0], last[name], 0)
                    when = recorded_when(holding)
                    reason = f"{newer.reason}; the run recorded {when} holds: {verdict.reason}"
                    out[name] = replace(verdict, reason=reason)
                continue
            # The run that decided last (replayed or recorded: after a failing edit and its
            # revert, the older pass that was replayed, not the newer fail) gives the reason.
            latest = max(variants, key=lambda r: (used.get(r.variant_id or 0, 0), r.variant_id))
            out[name] = stale_by_result(latest, last[name]) or why_changed(
                checker, latest, last[name], len(variants) - 1
            )
    if checker.refresh and store.locked:
        store.refresh(checker.refresh)
    return out
