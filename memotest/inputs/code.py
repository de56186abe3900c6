"""``code``: a Python source file, by the code of it that a run executed.

A run forked from a warm worker notes every code object its process evaluated and
reports, at its exit, those of the project's ``.py`` files that only the import system
read, each as ``[qualified name, first line, check digest]`` (``Trace.code``; how the
digests are taken, and why they are what a run can depend on: ``memotest/worker/codes.py``).
The refinement turns such a ``file`` input, when nothing else read the file (no other
process, no symlink), into a ``code`` input: its digest names the CAS blob of the digests
of the code objects that ran (:func:`record_tree`). Their cached bytecode (``__pycache__``)
is then no input: it is the same code, or Python compiles it anew.

It holds while the stat signature is the recorded one, or else while the file, compiled
anew, still has those code objects, alike (:func:`changed`). Code that is not in the file
as it is (a stale ``.pyc``, ``-O``) leaves it whole.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from memotest.inputs.base import InputKind, read_file, refresh, regular_file, sig_holds, type_word
from memotest.model import Input, Kind, StatSig, Trace
from memotest.worker.codes import COMPREHENSIONS, cache_tag, compile_tree, digest, qualname
from memotest.world.fingerprint import UNREADABLE, FileStates, Fingerprint, Refresh, is_racy

if TYPE_CHECKING:
    from memotest.store import Store


class Tree(NamedTuple):
    """A source file compiled (:func:`compile_tree`, or the error it raised), with the
    signature and clock it was read with, and the digests taken of its code objects."""

    codes: dict | Exception
    sig: StatSig
    verified_ns: int
    memo: dict


class Code(InputKind):
    kind = Kind.CODE
    blob = True

    def refine(
        self, inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
    ) -> list[Fingerprint]:
        if not trace.code:
            return inputs
        if states.blobs is None:
            states.blobs = store.read_blob
            states.local = store.roots.local
        coded: set[str] = set()
        out: list[Fingerprint] = []
        for fp in inputs:
            executed = trace.code.get(fp.path)
            if (
                executed is None
                or fp.kind is not Kind.FILE
                or fp.link is not None
                or fp.sig is None
                or fp.path in trace.read_elsewhere
            ):
                out.append(fp)
                continue
            try:
                tree = code_tree(states, fp.path, fp.sig)
            except OSError:
                out.append(fp)
                continue
            blob = None
            if tree.sig == fp.sig and not isinstance(tree.codes, Exception):
                blob = record_tree(tree.codes, executed, tree.memo)
            if blob is None:
                out.append(fp)
                continue
            out.append(
                Fingerprint(fp.path, Kind.CODE, store.put_blob(blob), fp.sig, fp.verified_ns)
            )
            coded.add(fp.path)
        if not coded:
            return inputs
        return [fp for fp in out if not bytecode_of(fp.path, coded)]

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        st = regular_file(states, path)
        if st is None:
            return False  # a symbolic link is never fingerprinted by its code
        if sig_holds(states, st, sig, verified_ns):
            return True
        if code_changed(states, path, digest, StatSig.of(st)) is not None:
            return False
        tree = _trees(states)[path]
        return refresh(states, sig, verified_ns, tree.sig, tree.verified_ns)

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        if not stat.S_ISREG(st.st_mode):
            return f"is now {type_word(st)}"
        return code_changed(states, recorded.path, recorded.digest) or "changed"


def _trees(states: FileStates) -> dict[str, Tree]:
    return states.derived.setdefault("code", {})


def code_tree(states: FileStates, path: str, sig: StatSig | None = None) -> Tree:
    """The file at ``path`` compiled, cached for the build. Compiled again only when its
    stat signature is not ``sig`` (or, without ``sig``, not what it was when last
    compiled) or was racily clean then."""
    trees = _trees(states)
    done = trees.get(path)
    if done is not None:
        if sig is None:
            st = states.lstat(path)
            sig = StatSig.of(st) if st is not None and st is not UNREADABLE else None
        if done.sig == sig and not is_racy(done.sig, done.verified_ns, states.racy_window_ns):
            return done
    source, read_sig, verified = read_file(states, path)
    codes: dict | Exception
    try:
        codes = compile_tree(source, path)
    except (SyntaxError, ValueError) as exc:
        codes = exc
    done = trees[path] = Tree(codes, read_sig, verified, {})
    return done


def code_changed(
    states: FileStates, path: str, digest: str, sig: StatSig | None = None
) -> str | None:
    """None if the file at ``path`` still has the code the ``code`` fingerprint
    ``digest`` names, else what changed (:func:`changed`)."""
    try:
        tree = code_tree(states, path, sig)
    except OSError as exc:
        return f"is unreadable ({exc.strerror or exc})"
    if states.blobs is None:
        return "its code could not be compared (no store)"
    try:
        blob = states.blobs(digest)
    except Exception:
        return "the record of its code is gone from the store"
    return changed(blob, tree.codes, tree.memo)


def bytecode_of(path: str, sources: set[str]) -> bool:
    """Whether ``path`` is the ``__pycache__`` folder or a cached bytecode file of one
    of ``sources`` (``pkg/__pycache__/mod.cpython-311.pyc`` of ``pkg/mod.py``)."""
    folder, name = os.path.split(path)
    if name == "__pycache__":
        return any(os.path.dirname(s) == folder for s in sources)
    if os.path.basename(folder) != "__pycache__" or not name.endswith(".pyc"):
        return False
    stem = name.split(".", 1)[0]
    return os.path.join(os.path.dirname(folder), stem + ".py") in sources


# -- the record and its check -----------------------------------------------------------


def record(source: bytes, path: str, executed: list[list[Any]]) -> bytes | None:
    """The fingerprint's content (JSON bytes) of a source file for a run that executed
    ``executed`` (``[qualified name, first line, check digest]`` each, as the run
    reported them), or None if one of them is not in ``source`` as it is now (the file
    was not what the run imported: a stale ``.pyc``, ``-O``, another compiler)."""
    try:
        codes = compile_tree(source, path)
    except (SyntaxError, ValueError):
        return None
    return record_tree(codes, executed)


def _memo(
    memo: dict | None, key: str, code: Any, lines: bool, quiet: list[int] | None = None
) -> str:
    if memo is None:
        return digest(code, lines, quiet)
    place = (key, lines, tuple(quiet) if quiet is not None else None)
    got = memo.get(place)
    if got is None:
        got = memo[place] = digest(code, lines, quiet)
    return got


def _quiet(value: Any) -> list[int] | None:
    """The offsets a run vouched ran no Python code (``worker/class_lines.py``), if
    ``value`` is such a list."""
    if isinstance(value, list) and all(type(x) is int for x in value):
        return sorted(value)
    return None


def record_tree(codes: dict, executed: list[list[Any]], memo: dict | None = None) -> bytes | None:
    """:func:`record` of a file already compiled (:func:`compile_tree`); ``memo`` keeps
    the digests taken, for the next call on the same ``codes``."""
    by_place = memo.get("places") if memo is not None else None
    if by_place is None:
        by_place = {}
        for key, (code, _body) in codes.items():
            by_place.setdefault((qualname(code), code.co_firstlineno), []).append(key)
        if memo is not None:
            memo["places"] = by_place
    ran = set()
    quiet: dict[str, list[int]] = {}
    for name, line, seen, *extra in executed:
        keys = [
            k for k in by_place.get((name, line), ()) if _memo(memo, k, codes[k][0], True) == seen
        ]
        if not keys:
            return None
        ran.update(keys)  # two alike on one line: both count
        offsets = _quiet(extra[0]) if extra else None
        if offsets is not None and len(keys) == 1 and codes[keys[0]][1]:
            quiet[keys[0]] = offsets  # a body the run vouched for (worker/class_lines.py)
    module = next(iter(codes))
    if module not in ran:
        return None  # the module's body always runs when it is imported
    digests = {k: _memo(memo, k, codes[k][0], not codes[k][1], quiet.get(k)) for k in sorted(ran)}
    data: dict[str, Any] = {"tag": cache_tag(), "code": digests}
    if quiet:
        data["quiet"] = quiet
    return json.dumps(data, sort_keys=True).encode()


def changed(blob: bytes, codes: dict | Exception, memo: dict | None = None) -> str | None:
    """None if ``codes`` (:func:`compile_tree` of the file now, or the exception it
    raised) still have the code ``blob`` (from :func:`record`) names, else what changed:
    the first code object (``Class.method``) that differs or is gone."""
    try:
        recorded = json.loads(blob)
    except ValueError:
        return "the record of its code is unreadable"
    if recorded.get("tag") != cache_tag():
        return "its code was recorded by another Python version"
    if isinstance(codes, Exception):
        return f"it no longer compiles ({type(codes).__name__})"
    quiet = recorded.get("quiet") or {}
    for key, want in recorded.get("code", {}).items():
        have = codes.get(key)
        if have is None or _memo(memo, key, have[0], not have[1], _quiet(quiet.get(key))) != want:
            name = key.rsplit("#", 1)[0]
            if name == "<module>":
                return (
                    "its module-level code changed (a statement, or the name, arguments "
                    "or docstring of a function)"
                )
            if have is not None and have[1] and name.rsplit(".", 1)[-1] not in COMPREHENSIONS:
                return (
                    f"the body of class {name} changed (a statement, or the name, "
                    "arguments or docstring of a method)"
                )
            return f"{name} changed"
    return None


KIND = Code()
