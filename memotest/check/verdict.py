"""The verdict on one target, fresh or stale, and the words that say why it is stale.

:mod:`memotest.check.plan` decides; this module holds what it decides (:class:`Fresh`,
:class:`Stale`, every ``Stale.kind`` in :data:`STALE_KINDS`) and how each reason is
worded: by the key (no file system access: :func:`stale_by_key`), by the result of the
run that holds (:func:`stale_by_result`), or by the inputs that changed
(:func:`why_changed`, and :func:`describe_all` for ``explain -v``). The order of
precedence of the reasons is in :mod:`memotest.check.plan`'s docstring.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memotest.check.holds import Checker
from memotest.check.keys import TargetKey
from memotest.check.shaping import withdrawn
from memotest.inputs.check import describe_change
from memotest.inputs.registry import kind_of
from memotest.model import Target
from memotest.store import FpRow, InputList, Record
from memotest.world.fingerprint import FileStates

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


def stale_by_key(
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


def stale_by_result(rec: Record, last: Record) -> Stale | None:
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


def _ids(rec: Record) -> Any:
    inputs = rec.inputs
    if not isinstance(inputs, InputList):  # pragma: no cover - records from the store do
        raise TypeError("plan() needs records loaded by Store.records()")
    return inputs.ids


def why_changed(checker: Checker, rec: Record, last: Record, others: int) -> Stale:
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
        when = recorded_when(rec)
        reason += f" [the last of {others + 1} recorded variants to run, recorded {when}]"
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


def recorded_when(rec: Record) -> str:  # when ``rec`` was recorded, in local time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.finished_ns / 1e9))
