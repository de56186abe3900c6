"""Fingerprints of a Python source file by the code of it that a run executed.

A run forked from a warm worker (``tracer/warm/``) reports, for a ``.py`` file that only
the import system read, the code objects of it that ran (``memotest/worker/code_watch.py``),
each by its digest (``memotest/worker/codes.py``, which says what of a file a run's
result can depend on, and why). A fingerprint is the map of the code objects' names in
the file's tree (``Outer.method#0``) to digests for those that ran; it holds while
compiling the file anew gives the same digests for each. This module makes the record
and checks it.
"""

from memotest.worker.codes import COMPREHENSIONS, cache_tag, compile_tree, digest, qualname


def record(source, path, executed):
    """The fingerprint's content (JSON bytes) of a source file for a run that executed
    ``executed`` (``[qualified name, first line, check digest]`` each, as the run
    reported them), or None if one of them is not in ``source`` as it is now (the file
    was not what the run imported: a stale ``.pyc``, ``-O``, another compiler)."""
    try:
        codes = compile_tree(source, path)
    except (SyntaxError, ValueError):
        return None
    return record_tree(codes, executed)


def _memo(memo, key, code, lines):
    if memo is None:
        return digest(code, lines)
    got = memo.get((key, lines))
    if got is None:
        got = memo[key, lines] = digest(code, lines)
    return got


def record_tree(codes, executed, memo=None):
    """:func:`record` of a file already compiled (:func:`compile_tree`); ``memo`` keeps
    the digests taken, for the next call on the same ``codes``."""
    import json

    by_place = memo.get("places") if memo is not None else None
    if by_place is None:
        by_place = {}
        for key, (code, _body) in codes.items():
            by_place.setdefault((qualname(code), code.co_firstlineno), []).append(key)
        if memo is not None:
            memo["places"] = by_place
    ran = set()
    for name, line, seen in executed:
        keys = [
            k for k in by_place.get((name, line), ()) if _memo(memo, k, codes[k][0], True) == seen
        ]
        if not keys:
            return None
        ran.update(keys)  # two alike on one line: both count
    module = next(iter(codes))
    if module not in ran:
        return None  # the module's body always runs when it is imported
    digests = {k: _memo(memo, k, codes[k][0], not codes[k][1]) for k in sorted(ran)}
    return json.dumps({"tag": cache_tag(), "code": digests}, sort_keys=True).encode()


def changed(blob, codes, memo=None):
    """None if ``codes`` (:func:`compile_tree` of the file now, or the exception it
    raised) still have the code ``blob`` (from :func:`record`) names, else what changed:
    the first code object (``Class.method``) that differs or is gone."""
    import json

    try:
        recorded = json.loads(blob)
    except ValueError:
        return "the record of its code is unreadable"
    if recorded.get("tag") != cache_tag():
        return "its code was recorded by another Python version"
    if isinstance(codes, Exception):
        return f"it no longer compiles ({type(codes).__name__})"
    for key, want in recorded.get("code", {}).items():
        have = codes.get(key)
        if have is None or _memo(memo, key, have[0], not have[1]) != want:
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
