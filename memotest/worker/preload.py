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
    for name, module in list(sys.modules.items()):
        try:  # not getattr: a lazy module (importlib.util.LazyLoader) would load
            spec = object.__getattribute__(module, "__dict__").get("__spec__")
        except Exception:
            continue
        origin = getattr(spec, "origin", None)
        if name in had or name in ("__main__", "__mp_main__") or not isinstance(origin, str):
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
    have."""
    import importlib.machinery

    found = []
    for top in sorted({n.split(".", 1)[0] for n in preloaded}):
        try:
            spec = object.__getattribute__(sys.modules[top], "__dict__").get("__spec__")
            have = getattr(spec, "origin", None)
            now = importlib.machinery.PathFinder.find_spec(top)
        except Exception:
            continue
        where = getattr(now, "origin", None)
        if isinstance(have, str) and isinstance(where, str) and where != have:
            try:
                same = os.path.samefile(where, have)
            except OSError:
                same = False
            if not same:
                found.append(top)
    return found
