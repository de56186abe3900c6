"""Importing more before forking (a preload), and what a run imported that a later
worker may preload (``memotest/tracer/warm/preload.py`` keeps the book of it)."""

import os
import sys

from .interpreter import threads

#: Modules whose mere presence in ``sys.modules`` code looks for: a preload that imports
#: one changes what a run that never imports it sees. ``multiprocessing``: structlog's
#: ``CallsiteParameterAdder`` names the process (``process_name``) only when it is
#: imported, as ``logging.LogRecord`` asks it for ``processName`` only then.
LOOKED_FOR = ("multiprocessing",)
#: One entry per preload ended so far.
ENDS = []


def preload(names, mark):
    """Imports ``names``; ``[name, why]`` of the first whose import warned (the run would
    have shown or raised the warning), printed, started a thread or imported a module
    code looks for by its presence (:data:`LOOKED_FOR`), else None. Before
    each import, a lookup of ``mark + name`` in the trace tells memotest whose import read
    what follows (``_project_reads``); a lookup of ``mark + "-N"`` ends the preload (the
    N-th of the worker: the shim logs a path once per process)."""
    import contextlib
    import importlib
    import warnings

    def size():
        return os.fstat(2).st_size

    out = os.dup(1)
    os.dup2(2, 1)  # what an import prints must not reach memotest as an answer
    present = {name for name in LOOKED_FOR if name in sys.modules}
    try:
        for name in names:
            if name in sys.modules:
                continue
            os.path.exists(mark + name)
            before = size()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with contextlib.suppress(BaseException):
                    importlib.import_module(name)  # if not here, the runs import what they can
            sys.stdout.flush()
            sys.stderr.flush()
            if caught:
                return [name, f"its import warned: {caught[0].category.__name__}"]
            if threads() != 1:
                return [name, "its import started a thread"]
            if size() != before:
                return [name, "its import printed"]
            for looked_for in LOOKED_FOR:
                if looked_for in sys.modules and looked_for not in present:
                    return [
                        name,
                        f"its import imported {looked_for}, whose presence code looks for",
                    ]
    finally:
        ENDS.append(None)
        os.path.exists(f"{mark}-{len(ENDS)}")  # the end of the preload
        os.dup2(out, 1)
        os.close(out)
    return None


def imported_report(preloaded, had, where):
    """The modules this run imported from the interpreter's folders (``where``) beyond
    those the worker ``had``: what the next worker may preload (``hooked``: those an
    import hook's loader made, such as pytest's rewriting, preloaded only under it); and
    the packages of the ``preloaded`` that the run's ``sys.path`` finds elsewhere
    (``shadowed``)."""
    import importlib.machinery

    kinds = (
        importlib.machinery.SourceFileLoader,
        importlib.machinery.SourcelessFileLoader,
        importlib.machinery.ExtensionFileLoader,
    )
    names = []
    hooked = []  # loaded by an import hook's loader (pytest's rewriting)
    # The worker's modules passed over first: most of a run's are.
    for name, module in [(n, m) for n, m in sys.modules.items() if n not in had]:
        try:  # not getattr: a lazy module (importlib.util.LazyLoader) would load
            spec = object.__getattribute__(module, "__dict__").get("__spec__")
        except Exception:
            continue
        origin = getattr(spec, "origin", None)
        if name in ("__main__", "__mp_main__") or not isinstance(origin, str):
            continue
        if not os.path.normpath(origin).startswith(where):
            continue
        loader = getattr(spec, "loader", None)
        if type(loader) in kinds:
            names.append(name)
        elif origin.endswith(".py") and hasattr(loader, "exec_module"):
            hooked.append(name)
    return {"modules": names, "hooked": hooked, "shadowed": shadowed(preloaded)}


def shadowed(preloaded):
    """The preloaded packages that the run's own ``sys.path`` would have found elsewhere
    (a run may put its own folders first: ``tests/helpers.py`` against site-packages'
    ``helpers``): the run imported the preloaded one instead, not what a fresh run would
    have. Where the worker's answer still holds (:func:`remember_shadowed`), from it: only
    the folders the run added to ``sys.path`` (and those of finders other than the import
    system's) are searched."""
    import importlib.machinery

    known = KNOWN.get("shadowed")
    search = importlib.machinery.PathFinder.find_spec
    before, after = (None, None) if known is None else added_to(known)
    held = before is not None and known[1] is preloaded and still(known)
    found = []
    for top in sorted({n.split(".", 1)[0] for n in preloaded}):
        try:
            spec = object.__getattribute__(sys.modules[top], "__dict__").get("__spec__")
            have = getattr(spec, "origin", None)
            if not held:
                where = getattr(search(top), "origin", None)
            else:
                was, _where, verdict, _hit = known[3][top]
                where = from_known(known, top, before, after, search)
                if have == was and where == known[3][top][1]:
                    if verdict:
                        found.append(top)
                    continue
        except Exception:
            continue
        if differs(have, where):
            found.append(top)
    return found


def from_known(known, top, before, after, search):
    """The origin the import system's search finds for ``top`` over ``before``, the
    worker's ``sys.path`` and ``after``: the first with a loader. The worker's folders
    searched then and unchanged (``trusted``) are not searched again: up to the one it
    found ``top`` in (``hit``; past the end: none), none has it."""
    path, trusted, hit = known[0], known[6], known[3][top][3]
    first = [*before, *(e for e, t in zip(path[:hit], trusted, strict=False) if not t)]
    if hit < len(path) and trusted[hit]:
        rest = []
    elif hit < len(path):
        rest = [*path[hit:], *after]  # searched on from there: unknown past it
    else:
        rest = list(after)
    for entries in (first, rest):
        spec = search(top, entries) if entries else None
        if spec is not None and spec.loader is not None:
            return spec.origin
    return known[3][top][1] if hit < len(path) and trusted[hit] else None


def differs(have, where):
    """Whether the origins ``have`` (the preloaded module's) and ``where`` (what the run's
    ``sys.path`` finds) are two files."""
    if isinstance(have, str) and isinstance(where, str) and where != have:
        try:
            return not os.path.samefile(where, have)
        except OSError:
            return True
    return False


#: What the worker found before its runs (:func:`remember_shadowed`): ``"shadowed"`` ->
#: (its ``sys.path``, the preloaded, ``{path: its stat}`` of what the search looked at,
#: ``{top: (the preloaded origin, the found origin, shadowed, the index of the folder
#: found in)}``, ``sys.path_hooks``, the finders of its ``sys.path``, which are trusted).
KNOWN = {}
#: A folder or file changed less than this long (ns) before the worker looked: its stat
#: cannot tell a later change in the same tick of the file system's clock.
RACY = 3_000_000_000


def remember_shadowed(preloaded):
    """In the worker, before its runs: :func:`shadowed`'s search over the worker's
    ``sys.path``, once, folder by folder up to the one that has each package (``hit``),
    with the stats that tell a run whether it still holds: of each folder the import
    system's ``FileFinder`` searched (``trusted``; one of another finder is searched again
    by each run), of the namespace portions on the way and of the file found there. Not
    kept when a path changed too lately."""
    import importlib.machinery
    import time

    KNOWN.pop("shadowed", None)
    now = time.time_ns()
    search = importlib.machinery.PathFinder.find_spec
    path = list(sys.path)
    answers = {}
    for top in sorted({n.split(".", 1)[0] for n in preloaded}):
        hit, where = len(path), None
        try:
            spec = object.__getattribute__(sys.modules[top], "__dict__").get("__spec__")
            have = getattr(spec, "origin", None)
            for at, entry in enumerate(path):
                spec = search(top, [entry])
                if spec is not None and spec.loader is not None:
                    hit, where = at, spec.origin
                    break
        except Exception:
            return
        answers[top] = (have, where, differs(have, where), hit)
    cache = sys.path_importer_cache
    finders = [cache.get(entry) for entry in path]
    trusted = [
        isinstance(e, str)
        and os.path.isabs(e)  # a relative folder: the run's is another (it changes folder)
        and (type(f) is importlib.machinery.FileFinder or (f is None and e in cache))
        for e, f in zip(path, finders, strict=True)
    ]
    looked = [e for e, t in zip(path, trusted, strict=True) if t]
    for top, (_have, where, _verdict, hit) in answers.items():
        for at in range(min(hit + 1, len(path))):
            found = finders[at]
            if not trusted[at] or found is None:
                continue
            if at == hit:
                looked.append(where)
            elif set.__contains__(found._path_cache, top):
                looked.append(os.path.join(path[at], top))  # a namespace portion, on
    stats = {p: stat_of(p) for p in looked}
    if any(s is not None and s[2] > now - RACY for s in stats.values()):
        return
    hooks = list(sys.path_hooks)
    KNOWN["shadowed"] = (path, preloaded, stats, answers, hooks, finders, trusted)


def stat_of(path):
    """What tells a change of ``path``: its inode, device, times and size; None if absent.
    ``posix.stat``, as the import system's search: not ``os.stat``, which a run watching
    its code wraps (``code_watch.noting``)."""
    import posix

    try:
        st = posix.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_mode)


def added_to(known):
    """``(before, after)``: the run's ``sys.path`` as the worker's with folders added before
    and after it, or ``(None, None)``."""
    path, n = sys.path, len(known[0])
    for at in range(len(path) - n + 1):
        if path[at : at + n] == known[0]:
            return path[:at], path[at + n :]
    return None, None


def still(known):
    """Whether the import system's search over the worker's ``sys.path`` finds what it
    found in the worker: the same hooks, the same finders of the folders it trusts, and
    nothing it looked at changed."""
    hooks = sys.path_hooks
    if len(hooks) != len(known[4]) or any(a is not b for a, b in zip(hooks, known[4], strict=True)):
        return False
    cache = sys.path_importer_cache
    for entry, finder, trusted in zip(known[0], known[5], known[6], strict=True):
        if trusted and cache.get(entry) is not finder:
            return False
    return all(stat_of(p) == s for p, s in known[2].items())
