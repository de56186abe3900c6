"""Which code each labelled part of a run depended on: the map test-level selection reads.

A run forked from a warm worker notes the code it executes, and a test runner's plugin
labels its parts (``memotest/worker/code_watch.py``'s ``phase``: for pytest each test,
whose part counts the fixtures it used, whichever test's setup ran them:
``memotest_pytest/attribute.py``). The run reports, per part and for what ran outside
every part (imports, collection, the end: ``global``), the code objects of the project's
``.py`` files it executed, by qualified name and first line (``Trace.phases``): each code
object once, each phase's by index, and per part the phases it uses
(``memotest/worker/phases.py``); a part's code is its phase's and theirs, taken here once
per phase rather than by the run once per test.

:func:`parts_blob` turns that into the blob a record names (``Record.parts``): each code
object by its key in the file's tree (``Outer.method#0``, the scheme of
``memotest/worker/codes.py``), and for each file the digests of those code objects as
the file was when the run's inputs were fingerprinted (``trees``: with line numbers for
functions, the bodies as ``code`` inputs take them), so that a later build can tell
which of them changed, by compiling the file again, whatever kind of input the file is in
the record. A file whose code the run executed but which cannot be mapped so (it changed
since, it does not compile, a code object is not in it, another process read it) is
listed in ``unmapped``: a
change to it can never be confined to functions. What uses the blob is the plugin's
(``memotest_pytest/selection.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memotest.inputs.code import Tree, _memo, code_tree
from memotest.model import Trace
from memotest.worker.codes import cache_tag, qualname
from memotest.world.fingerprint import FileStates, Fingerprint

if TYPE_CHECKING:
    from memotest.store import Store


def parts_blob(
    trace: Trace, inputs: Sequence[Fingerprint], states: FileStates, store: Store
) -> str | None:
    """The digest of the CAS blob of ``trace``'s parts (None when the run labelled
    none): ``{"tag", "order", "global", "peeked", "parts": {label: {path: [key, ...]}}, "trees":
    {path: {key: digest}}, "unmapped": [path, ...], "openers": {path: [file, ...]}}``."""
    phases: Any = trace.phases
    if not isinstance(phases, dict) or not isinstance(phases.get("uses"), dict):
        return None
    table: list[Any] = phases.get("codes") or []
    of_phase: dict[str, Any] = phases.get("phases") or {}
    sigs = {fp.path: fp.sig for fp in inputs}
    trees: dict[str, dict[str, str]] = {}
    places: dict[str, dict[tuple[str, int], list[str]] | None] = {}
    compiled: dict[str, Tree] = {}

    def place_map(path: str) -> dict[tuple[str, int], list[str]] | None:
        if path in places:
            return places[path]
        found: dict[tuple[str, int], list[str]] | None = None
        try:
            tree = code_tree(states, path, sigs.get(path))
        except OSError:
            tree = None
        if (
            tree is not None
            and not isinstance(tree.codes, Exception)
            and sigs.get(path) is not None
            and tree.sig == sigs[path]
        ):
            found = {}
            for key, (code, _body) in tree.codes.items():
                found.setdefault((qualname(code), code.co_firstlineno), []).append(key)
            trees[path] = {}
            compiled[path] = tree
        places[path] = found
        return found

    unmapped: set[str] = set()
    #: Per code of the table: its path and its keys in the file's tree (none: unmapped).
    mapped: dict[int, tuple[str, list[str]]] = {}

    def key_of(at: int) -> tuple[str, list[str]]:
        done = mapped.get(at)
        if done is not None:
            return done
        path, name, line = table[at]
        by_place = place_map(path)
        got: list[str] = []
        if by_place is None or not (got := by_place.get((name, line)) or []):
            unmapped.add(path)
        if by_place is not None:
            tree = compiled[path]
            assert isinstance(tree.codes, dict)
            for key in got:
                code, body = tree.codes[key]
                trees[path][key] = _memo(tree.memo, key, code, not body)
        done = mapped[at] = (path, got)
        return done

    def grouped(group: Any) -> dict[str, set[str]]:
        """The keys of the code ``group`` names by index, by file (a file that cannot be
        mapped is left out, and unmapped)."""
        out: dict[str, set[str]] = {}
        for at in group or ():
            path, got = key_of(at)
            if path in compiled:
                out.setdefault(path, set()).update(got)
        return out

    # Each phase's keys once: a test's part is its phase's and its fixtures', which
    # many tests share.
    per_phase: dict[str, dict[str, set[str]]] = {}

    def part(label: str, others: Any) -> dict[str, list[str]]:
        out: dict[str, set[str]] = {}
        for each in (label, *others):
            if each not in per_phase:
                per_phase[each] = grouped(of_phase.get(each))
            for path, got in per_phase[each].items():
                out.setdefault(path, set()).update(got)
        return {p: sorted(k) for p, k in out.items()}

    def keys(group: Any) -> dict[str, list[str]]:
        return {p: sorted(k) for p, k in grouped(group).items()}

    blob = {
        "tag": cache_tag(),
        "global": keys(phases.get("global")),
        "peeked": keys(phases.get("peeked")),
        "order": list(phases["uses"]),
        "parts": {label: part(label, others) for label, others in phases["uses"].items()},
        "openers": phases.get("openers") or {},
    }
    # A file another process read (a subprocess running the project's code) may have
    # run code no part shows: a change to it is never confined to some tests.
    unmapped.update(p for p in trees if p in trace.read_elsewhere)
    blob["trees"] = {p: t for p, t in trees.items() if p not in unmapped}
    blob["unmapped"] = sorted(unmapped)
    return store.put_blob(json.dumps(blob, sort_keys=True).encode())
