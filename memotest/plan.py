"""Fresh or stale: which targets can replay their last result, and why the others can't.

This is the hot path of a no-op build. Every record's inputs are fingerprint ids shared
across records, so each *distinct* fingerprint is validated once (one ``lstat`` per path,
no hashing when the stat signature is unchanged and not racy), and a target is fresh iff
its id array is disjoint from the set of invalid ids.

A target is stale, in this order of precedence, when: it is ``forced``; it is tagged
``no-cache``; it has no record (``new``); the record was made by another memotest
(``recorder``); its ``definition`` or ``env`` changed (naming the fields and variables);
a setting that shaped what the record holds was withdrawn (``settings``, naming it:
:mod:`memotest.shaping`); the last run did not pass (``failed``); the last run was
``uncacheable`` (with the reason the record gives); a blob the replay needs is gone
(``blob-missing``); or an ``input`` changed (naming the first changed path in sorted
order, and counting them). Missing declared outputs are not a reason: a hit restores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memotest.fingerprint import FileStates, Refresh
from memotest.inputs.check import describe_change
from memotest.inputs.registry import begin_check, verifiers
from memotest.keys import TargetKey
from memotest.model import Target
from memotest.shaping import withdrawn
from memotest.store import FpRow, InputList, Record, Store, default_recorder, split_output

__all__ = ["STALE_KINDS", "Fresh", "Stale", "TargetKey", "plan"]

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


def _stale_by_record(
    target: Target, key: TargetKey, rec: Record | None, force: bool, recorder: str
) -> Stale | None:
    """The reasons that need no file system access, in order of precedence."""
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
    if rec.status != "passed":
        how = {
            "failed": f"last run failed (exit code {rec.exit_code})",
            "timeout": "last run timed out",
            "error": "last run could not be carried out",
        }.get(rec.status, f"last run {rec.status}")
        return Stale("failed", how, detail=rec.status, record=rec)
    if not rec.cacheable:
        reason = rec.uncacheable_reason or "last run was not cacheable"
        return Stale("uncacheable", reason, detail=rec.uncacheable_reason, record=rec)
    return None


def plan(
    targets: Sequence[Target],
    keys: Mapping[str, TargetKey],
    store: Store,
    states: FileStates,
    *,
    force: bool = False,
    recorder: str | None = None,
) -> dict[str, Fresh | Stale]:
    """Decide for each target whether its last result still holds.

    ``keys`` maps each target's name to its :class:`~memotest.keys.TargetKey`. ``states``
    is the build's file-system snapshot (each path stat'ed once for all targets). Returns
    a dict in the order of ``targets``. When the store holds the build lock, fingerprints
    that had to be re-hashed (racily clean) and still held get their new signature stored
    in one transaction, so the next build takes the fast path; nothing is written when
    nothing needed it.
    """
    recorder = recorder if recorder is not None else default_recorder()
    if states.blobs is None:
        states.blobs = store.read_blob  # what the digests of some kinds name
    records = store.records(t.name for t in targets)
    out: dict[str, Fresh | Stale] = {}
    pending: list[tuple[Target, Record, Any]] = []
    for target in targets:
        rec = records.get(target.name)
        stale = _stale_by_record(target, keys[target.name], rec, force, recorder)
        if stale is not None:
            out[target.name] = stale
            continue
        assert rec is not None
        missing_blob = next(
            (
                d
                for d in [rec.log_digest, *(split_output(v)[0] for v in rec.outputs.values())]
                if d and not store.has_blob(d)
            ),
            None,
        )
        if missing_blob is not None:
            out[target.name] = Stale(
                "blob-missing",
                "the stored log or outputs are gone from the store",
                detail=missing_blob,
                record=rec,
            )
            continue
        inputs = rec.inputs
        ids = inputs.ids if isinstance(inputs, InputList) else None
        if ids is None:  # pragma: no cover - records from the store always have InputList
            raise TypeError("plan() needs records loaded by Store.records()")
        out[target.name] = Fresh(rec)  # provisional: keeps the output in target order
        pending.append((target, rec, ids))

    needed: set[int] = set()
    for _t, _r, ids in pending:
        needed.update(ids)
    rows = store.fingerprint_rows(needed) if needed else {}

    invalid: set[int] = set()
    refresh: dict[int, tuple[Sequence[int], int]] = {}
    verify = verifiers()
    late_kinds = begin_check(states)
    # Newest first: when a path has several fingerprints, the current one (usually the
    # newest) is proven by its stat signature and the older ones fail without hashing.
    # The kinds that rely on what the others' checks stat'ed go last: appended to the
    # list the loop is going through, they come back once it reaches its first end.
    todo = sorted(needed, reverse=True)
    first = len(todo)
    for i, fid in enumerate(todo):
        row = rows.get(fid)
        if row is None:
            invalid.add(fid)
            continue
        if i < first and row[2] in late_kinds:
            todo.append(fid)
            continue
        # row: id, path, kind, digest, link, mtime_ns, size, ino, ctime_ns, verified_ns
        sig = row[5:9] if row[5] is not None else None
        check = verify.get(row[2])
        verdict = check(states, row[1], row[3], sig, row[9], row[4]) if check else False
        if verdict is True:
            continue
        if verdict is False:
            invalid.add(fid)
        elif isinstance(verdict, Refresh):
            refresh[fid] = (verdict.sig, verdict.verified_ns)

    if invalid:
        described: dict[int, str] = {}
        for target, rec, ids in pending:
            if invalid.isdisjoint(ids):
                continue
            changed = invalid.intersection(ids)
            known = sorted(
                (FpRow._make(rows[i]) for i in changed if i in rows),
                key=lambda r: (r.path, r.kind, r.digest),
            )
            if not known:
                out[target.name] = Stale(
                    "input",
                    "the record's inputs are missing from the store",
                    count=len(changed),
                    record=rec,
                )
                continue
            first = known[0]
            detail = described.get(first.id)
            if detail is None:
                detail = describe_change(first.fingerprint(), states) or "changed"
                described[first.id] = detail
            reason = f"{first.path}: {detail}"
            if len(changed) > 1:
                reason += f" (and {len(changed) - 1} more changed input{'s' * (len(changed) > 2)})"
            out[target.name] = Stale(
                "input", reason, path=first.path, detail=detail, count=len(changed), record=rec
            )

    if refresh and store.locked:
        store.refresh(refresh)
    return out
