"""Which code each labelled part of a run depended on: the map test-level selection reads.

A run forked from a warm worker notes the code it executes, and a test runner's plugin
labels its parts (``memotest/worker/code_watch.py``'s ``phase``: for pytest each test,
whose part counts the fixtures it used, whichever test's setup ran them:
``memotest_pytest/attribute.py``). The run reports, per part and for what ran outside
every part (imports, collection, the end: ``global``), the code objects of the project's
``.py`` files it executed, by qualified name and first line (``Trace.phases``).

:func:`parts_blob` turns that into the blob a record names (``Record.parts``): each code
object by its key in the file's tree (``Outer.method#0``, the scheme of
``memotest/worker/codes.py``), and for each file the digests of those code objects as
the file was when the run's inputs were fingerprinted (``trees``: with line numbers for
functions, the bodies as ``code`` inputs take them), so that a later build can tell
which of them changed, by compiling the file again, whatever kind of input the file is in
the record. A file whose code the run executed but which cannot be mapped so (it changed
since, it does not compile, a code object is not in it) is listed in ``unmapped``: a
change to it can never be confined to functions. What uses the blob is the plugin's
(``memotest_pytest/selection.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memotest.fingerprint import FileStates, Fingerprint
from memotest.inputs.code import Tree, _memo, code_tree
from memotest.model import Trace
from memotest.worker.codes import cache_tag, qualname

if TYPE_CHECKING:
    from memotest.store import Store


def parts_blob(
    trace: Trace, inputs: Sequence[Fingerprint], states: FileStates, store: Store
) -> str | None:
    """The digest of the CAS blob of ``trace``'s parts (None when the run labelled
    none): ``{"tag", "order", "global", "parts": {label: {path: [key, ...]}}, "trees":
    {path: {key: digest}}, "unmapped": [path, ...], "openers": {path: [file, ...]}}``."""
    phases: Any = trace.phases
    if not isinstance(phases, dict) or not isinstance(phases.get("parts"), dict):
        return None
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

    def keys(entries: Any) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for path, codes in (entries or {}).items():
            by_place = place_map(path)
            if by_place is None:
                unmapped.add(path)
                continue
            tree = compiled[path]
            assert isinstance(tree.codes, dict)
            mine = out.setdefault(path, [])
            for name, line in codes:
                got = by_place.get((name, line))
                if not got:
                    unmapped.add(path)
                    continue
                for key in got:
                    mine.append(key)
                    code, body = tree.codes[key]
                    trees[path][key] = _memo(tree.memo, key, code, not body)
        return {p: sorted(set(k)) for p, k in out.items()}

    blob = {
        "tag": cache_tag(),
        "global": keys(phases.get("global")),
        "order": [label for label in phases["parts"]],
        "parts": {label: keys(entries) for label, entries in phases["parts"].items()},
        "openers": phases.get("openers") or {},
    }
    blob["trees"] = {p: t for p, t in trees.items() if p not in unmapped}
    blob["unmapped"] = sorted(unmapped)
    return store.put_blob(json.dumps(blob, sort_keys=True).encode())
