"""Test-level selection: a stale test-file target runs only the tests whose result could
have changed, and replays the others' outcomes (``build --select tests``).

A record whose run labelled its parts (``Record.parts``, ``memotest/recording/parts.py``: per test
the code it and every fixture of its closure ran, and the code that ran outside every
test, at import and collection) and reported each test's outcome (``Record.tests_digest``)
can be run in part. :func:`decide` says which tests, from the record that failed to hold:

* every input that changed must be a Python file the map covers (a ``code`` input, or a
  ``file`` input such as the test file or a conftest, which the test runner itself opens:
  :data:`BENIGN_OPENERS`), that still compiles, that nothing else of the run opened or
  stat'ed, and none of whose code that ran at import or collection changed (a module or
  class body, a decorator, a parametrization: all in the module's digest);
* the tests to run: those whose part names a changed code object, those that failed or
  errored last time (a skip or an xfail is an outcome of the code, as a pass is), and
  (shared state flows forward) every test after the first of those, in the recorded
  order; tests the run collects that the record does not know run too.

Anything else (a data file, a changed import-time body, a file no test's code accounts
for, a record of another key) runs the whole file (None). The ids travel in the run's
environment (:data:`SELECT_ENV`, never part of the key); the test runner's plugin
deselects the others. :func:`merge` makes the record of the partial run a whole one:
its outcomes with the unrun tests' (replayed, ``cached``), its inputs with the old ones
the unrun tests rely on, so that a later build checks it exactly as a normal record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from memotest.check.keys import TargetKey
from memotest.check.shaping import withdrawn
from memotest.inputs.code import _memo, code_tree
from memotest.inputs.registry import begin_check, verifiers
from memotest.model import Kind
from memotest.run.testcases import TestOutcome, decode, encode
from memotest.store import Record, Store
from memotest.worker.codes import cache_tag
from memotest.world.fingerprint import FileStates, Fingerprint

#: The variable naming the tests a partial run runs (JSON: ``{"run": [id, ...], "known":
#: [id, ...]}``); never part of a target's key.
SELECT_ENV = "MEMOTEST_SELECT"
#: Fragments of the paths of a test runner's own code whose opening or stat'ing of a test
#: file or conftest only shapes reports (pytest's assertion rewriting, its tracebacks):
#: a test runner's memotest plugin adds its own (``memotest_pytest``).
BENIGN_OPENERS: list[str] = []
#: Past this many bytes of ids, the whole file runs (an environment variable's bound).
MAX_IDS = 100_000


@dataclass
class Selection:
    """The tests a partial run runs (``run``, with why each), of ``total`` recorded."""

    record: Record
    run: list[str]
    why: dict[str, str]
    total: int
    old: list[TestOutcome]
    changed: dict[str, set[str]] = field(default_factory=dict)  # path -> changed keys

    def env(self) -> dict[str, str]:
        known = [t.id for t in self.old]
        return {SELECT_ENV: json.dumps({"run": self.run, "known": known})}

    def describe(self, limit: int = 5) -> str:
        """``would run 2 of 14 tests: test_a (f changed), ...``."""
        shown = ", ".join(f"{i.rsplit('::', 1)[-1]} ({self.why[i]})" for i in self.run[:limit])
        more = f" and {len(self.run) - limit} more" if len(self.run) > limit else ""
        return f"{len(self.run)} of {self.total} tests: {shown}{more}"


def _benign(opener: str) -> bool:
    who = opener.split(":", 1)[1] if opener.startswith("os.stat:") else opener
    return any(fragment in who for fragment in BENIGN_OPENERS)


def decide(rec: Record, key: TargetKey, states: FileStates, store: Store) -> Selection | None:
    """The tests to run of a stale target whose newest record is ``rec``, or None: the
    whole file."""
    if not rec.parts or not rec.tests_digest or rec.status not in ("passed", "failed"):
        return None
    if not rec.cacheable or rec.def_hash != key.def_hash or rec.env_hash != key.env_hash:
        return None
    if key.shaping is not None and withdrawn(rec.shaping, key.shaping):
        return None
    try:
        blob = json.loads(store.read_blob(rec.parts))
        old = decode(store.read_blob(rec.tests_digest))
    except Exception:
        return None
    if blob.get("tag") != cache_tag():
        return None
    order = [label[2:] for label in blob.get("order", []) if label.startswith("t:")]
    if {t.id for t in old} - set(order):
        return None  # an outcome of no test (a collection error): the whole file
    changed = _changed_code(rec, blob, states)
    if changed is None:
        return None
    labels = blob["parts"]
    why: dict[str, str] = {}
    for test in order:
        part = labels.get("t:" + test, {})
        hit = sorted(k for path, keys in changed.items() for k in keys & set(part.get(path, ())))
        if hit:
            why[test] = f"{hit[0].rsplit('#', 1)[0]} changed"
    for t in old:
        if t.failing and t.id not in why:
            why[t.id] = f"{t.outcome} last time"
    first = next((i for i, t in enumerate(order) if t in why), len(order))
    run = order[first:]
    for test in run:
        why.setdefault(test, f"after {order[first].rsplit('::', 1)[-1]}")
    sel = Selection(rec, run, why, len(order), old, changed)
    return sel if len(json.dumps(sel.env())) < MAX_IDS else None


def _changed_code(rec: Record, blob: dict, states: FileStates) -> dict[str, set[str]] | None:
    """Per changed input of ``rec``, the keys of the code of it that changed; None when
    a change is not confined to code that only tests ran."""
    verify = verifiers()
    begin_check(states)
    trees, glob, peeked = blob.get("trees", {}), blob.get("global", {}), blob.get("peeked", {})
    tested: dict[str, set[str]] = {}
    for part in blob["parts"].values():
        for path, keys in part.items():
            tested.setdefault(path, set()).update(keys)
    out: dict[str, set[str]] = {}
    for fp in rec.inputs:
        check = verify.get(fp.kind.value)
        if check and check(states, fp.path, fp.digest, fp.sig, fp.verified_ns, fp.link) is not (
            False
        ):
            continue
        path = fp.path
        if fp.kind not in (Kind.CODE, Kind.FILE) or path not in trees:
            return None
        if path in blob.get("unmapped", ()) or not all(
            _benign(o) for o in blob.get("openers", {}).get(path, ())
        ):
            return None
        if fp.kind is Kind.CODE and not _covered(fp.digest, trees[path], states):
            return None
        try:
            tree = code_tree(states, path)
        except OSError:
            return None
        if isinstance(tree.codes, Exception):
            return None
        keys = set()
        for k, want in trees[path].items():
            have = tree.codes.get(k)
            if have is None or _memo(tree.memo, k, have[0], not have[1]) != want:
                keys.add(k)
        if keys & set(glob.get(path, ())):
            return None  # code that ran at import or collection changed
        if keys - tested.get(path, set()) - set(peeked.get(path, ())):
            return None  # code no test accounts for
        out[path] = keys
    return out


def _covered(digest: str, tree: dict[str, str], states: FileStates) -> bool:
    """Whether every code object a ``code`` input holds is in the map (none ran outside
    the parts the run labelled)."""
    try:
        assert states.blobs is not None
        recorded = json.loads(states.blobs(digest))
    except Exception:
        return False
    return set(recorded.get("code", {})) <= set(tree)


def merge_tests(sel: Selection, new: list[TestOutcome] | None) -> list[TestOutcome] | None:
    """The outcomes of a partial run with the unrun tests' replayed (``cached``), in the
    recorded order, then the tests the record did not know."""
    if new is None:
        return None
    ran = {t.id: t for t in new}
    out = [ran.pop(t.id, None) or t.as_cached() for t in sel.old]
    return out + list(ran.values())


def merge_record(
    sel: Selection, rec: Record, states: FileStates, store: Store
) -> tuple[Record, str | None]:
    """The record of a partial run made whole: the unrun tests' outcomes, code and
    inputs added (why it cannot be, instead, makes it not reusable)."""
    if rec.tests_digest is None or rec.parts is None:
        return rec, "the partial run reported no tests or parts"
    new_tests = decode(store.read_blob(rec.tests_digest))
    ran = {t.id for t in new_tests}
    unrun = [t.id for t in sel.old if t.id not in ran]
    old_blob = json.loads(store.read_blob(sel.record.parts))
    new_blob = json.loads(store.read_blob(rec.parts))
    # The code the unrun tests rely on, per file, with its digests as recorded.
    kept: dict[str, dict[str, str]] = {}
    for test in unrun:
        for path, keys in old_blob["parts"].get("t:" + test, {}).items():
            tree = old_blob["trees"].get(path)
            if tree is None:
                return rec, f"the code of {path} the unrun tests ran is not mapped"
            for k in keys:
                kept.setdefault(path, {})[k] = tree[k]
    for path, keys in kept.items():  # still so now (the file may have changed again)
        try:
            tree = code_tree(states, path)
        except OSError:
            return rec, f"{path} is unreadable"
        if isinstance(tree.codes, Exception):
            return rec, f"{path} no longer compiles"
        for k, want in keys.items():
            have = tree.codes.get(k)
            if have is None or _memo(tree.memo, k, have[0], not have[1]) != want:
                return rec, f"{path} changed while its tests ran"
    failing = set(sel.changed)
    new_by_path = {fp.path: fp for fp in rec.inputs}
    inputs: list[Fingerprint] = []
    for fp in rec.inputs:
        if fp.kind is Kind.CODE and fp.path in kept:
            mine = json.loads(store.read_blob(fp.digest))
            mine["code"] = {**kept[fp.path], **mine["code"]}
            data = json.dumps(mine, sort_keys=True).encode()
            fp = Fingerprint(fp.path, Kind.CODE, store.put_blob(data), fp.sig, fp.verified_ns)
        inputs.append(fp)
    seen = {(fp.path, fp.kind, fp.digest) for fp in inputs}
    for fp in sel.record.inputs:
        if fp.path in failing:
            now = new_by_path.get(fp.path)
            if fp.path in kept and (now is None or now.kind not in (Kind.CODE, Kind.FILE)):
                return rec, f"{fp.path}: the unrun tests' code cannot be recorded"
            continue  # the new run's fingerprint (whole, or with their code) stands for it
        if (fp.path, fp.kind, fp.digest) not in seen:
            inputs.append(fp)  # held at the check: what the unrun tests may rely on
            seen.add((fp.path, fp.kind, fp.digest))
    parts = dict(new_blob)
    parts["parts"] = {**{"t:" + t: old_blob["parts"].get("t:" + t, {}) for t in unrun}}
    parts["parts"].update(new_blob["parts"])
    order = [t.id for t in merge_tests(sel, new_tests) or []]
    parts["order"] = ["t:" + t for t in order]
    trees = {p: dict(t) for p, t in new_blob.get("trees", {}).items()}
    for path, keys in kept.items():
        trees.setdefault(path, {}).update(keys)
    parts["trees"] = trees
    unmapped = set(new_blob.get("unmapped", [])) | set(old_blob.get("unmapped", []))
    parts["unmapped"] = sorted(unmapped)
    openers: dict[str, Any] = {p: list(o) for p, o in old_blob.get("openers", {}).items()}
    for p, o in new_blob.get("openers", {}).items():
        openers[p] = sorted(set(openers.get(p, [])) | set(o))
    parts["openers"] = openers
    merged = merge_tests(sel, new_tests) or []
    plain = [replace(t, cached=False) for t in merged]
    return (
        replace(
            rec,
            inputs=inputs,
            parts=store.put_blob(json.dumps(parts, sort_keys=True).encode()),
            tests_digest=store.put_blob(encode(plain)),
            shaping=sorted(set(rec.shaping) | set(sel.record.shaping)),
        ),
        None,
    )
