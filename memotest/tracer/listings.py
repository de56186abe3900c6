"""Folders listed only to look for certain names in them: which names.

A listed folder is an input by all its entries (``Kind.LISTING``): any new file in it
re-runs the target. But most listings a Python test run makes are made by readers that
then look only for certain names in what they listed:

* the import system: a ``FileFinder`` lists each folder of ``sys.path`` and of every
  package once, then asks that list for ``NAME``, ``NAME.py``, ``NAME.cpython-311-...so``
  and the like, for each module it looks for there;
* ``importlib.metadata``: the ``*.dist-info`` and ``*.egg-info`` entries of each folder of
  ``sys.path`` (entry points, versions);
* ``glob``: one folder level against one pattern (stevedore hashes
  ``*.dist-info/entry_points.txt`` of every folder of ``sys.path``);
* pytest's collection, on its way down to the test file it is given: of each folder above
  the file it collects only the entry that leads to the file (pytest 8 makes a collector
  for every entry and drops the others unmatched).

In a run forked from a warm worker, an audit hook sees every listing made through
Python's ``os.listdir`` and ``os.scandir`` and who made it, and each import-system
listing notes every name asked of it. A folder of the project that only such readers
listed, and only in the run's own process (and the worker's), is then an input by those
of its entries that match what they looked for (``Kind.ENTRIES``): a new ``py.typed``, a
``.pre-commit-config.yaml`` or a renamed ``CHANGES.md`` re-runs nothing, a new module
that an import would now find first re-runs what imported it. Any other listing of the
folder, by Python code or by another process, keeps it whole.

What this rests on: that C code in the run's own process (a C extension calling
``opendir``) does not list a folder of the project, which the audit hook cannot see;
that a hook of a pytest plugin does nothing with the entries of the folders above the
test file that pytest then drops; and that nothing lists a folder before the worker's
hook is installed but the import system (the interpreter's start-up).

The first part of this module runs inside the warm worker (``warm.py`` includes its
source), in the target's interpreter: the standard library only, Python 3.10 syntax.
"""

import os
import sys

#: Folder -> the names looked for in it (exact entry names).
LOOKS = {}
#: Folder -> the patterns looked for in it (``fnmatch``; ``i:`` before a pattern: matched
#: against the name in lower case).
PATTERNS = {}
#: Folders some other reader listed: every entry counts.
WHOLE = set()
#: Not empty when some listing cannot be attributed (a folder listed by a file descriptor,
#: or an import system that does not ask its cache as the notes expect): all stay whole.
BLIND = []

METADATA_FILES = ("/importlib/metadata/__init__.py", "/importlib_metadata/__init__.py")
DIST_PATTERNS = ("i:*.dist-info", "i:*.egg-info", "i:egg-info")
PYTEST_COLLECT = ("/_pytest/main.py", "/_pytest/python.py")
FILL = []  # the code of the import system's own FileFinder._fill_cache


class Looked(set):
    """A ``FileFinder``'s cache of a folder's entries that notes every name asked of it."""

    __slots__ = ("looks",)

    def __contains__(self, name):
        self.looks.add(name)
        return set.__contains__(self, name)


def absolute(path):
    """A listed path as the shim writes it: absolute and normalized."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return os.path.normpath(os.path.join(os.getcwd(), path or "."))


def below(where, collector):
    """The entries of ``where`` that lead to what pytest was asked to collect (the
    arguments of the ``collector``'s session); None if one of them is ``where`` or a
    folder above it (pytest then collects all of it), or none is inside it."""
    try:
        config = collector.config
        start = str(config.invocation_params.dir)
        args = [absolute(os.path.join(start, str(a).split("::", 1)[0])) for a in config.args]
    except Exception:
        return None
    base = os.path.join(where, "")
    names = set()
    for arg in args:
        if arg == where or base.startswith(os.path.join(arg, "")):
            return None
        if arg.startswith(base):
            names.add(arg[len(base) :].split("/", 1)[0])
    return names or None


def on_listing(event, args):
    """The audit hook: who listed which folder."""
    if event != "os.listdir" and event != "os.scandir":
        return
    path = args[0] if args else None
    if isinstance(path, int):
        BLIND.append(path)
        return
    where = absolute(path)
    frame = sys._getframe(1)
    code = frame.f_code
    if FILL and code is FILL[0]:
        return  # the import system: the names asked of its cache are noted (Looked)
    name, file = code.co_name, code.co_filename
    up = frame.f_back
    if name == "children" and file.endswith(METADATA_FILES):
        PATTERNS.setdefault(where, set()).update(DIST_PATTERNS)
        return
    if name == "_iterdir" and file.endswith("/glob.py") and up is not None:
        top = up.f_back
        if up.f_code.co_name == "_listdir" and top is not None and top.f_code.co_name == "_glob1":
            pattern = top.f_locals.get("pattern")
            if isinstance(pattern, bytes):
                pattern = os.fsdecode(pattern)
            if isinstance(pattern, str):
                PATTERNS.setdefault(where, set()).add(pattern)
                return
    if (
        name == "scandir"
        and file.endswith("/_pytest/pathlib.py")
        and up is not None
        and up.f_code.co_name == "collect"
        and up.f_code.co_filename.endswith(PYTEST_COLLECT)
    ):
        names = below(where, up.f_locals.get("self"))
        if names is not None:
            LOOKS.setdefault(where, set()).update(names)
            return
    WHOLE.add(where)


FILL_SOURCE = """
def _fill_cache(self):
    fill(self)
    cache = Looked(self._path_cache)
    cache.looks = LOOKS.setdefault(absolute(self.path), set())
    self._path_cache = cache
"""


def watch_listings():
    """Installs the audit hook and makes every ``FileFinder`` cache note what is asked
    of it. The folders the import system listed before (the interpreter's start-up) are
    taken to have been asked for every module imported so far, and for ``site``'s two."""
    import importlib.machinery
    from importlib import _bootstrap_external as bootstrap

    finder = bootstrap.FileFinder
    fill = finder._fill_cache
    FILL.append(fill.__code__)
    suffixes = ["", *importlib.machinery.all_suffixes()]
    early = set()
    for module in [*sys.modules, "sitecustomize", "usercustomize"]:
        tail = module.rpartition(".")[2]
        early.update(tail + suffix for suffix in suffixes)
    filled = []
    for cached in list(sys.path_importer_cache.values()):
        if type(cached) is finder and cached._path_mtime != -1:
            looks = LOOKS.setdefault(absolute(cached.path), set())
            looks.update(early)
            cache = Looked(cached._path_cache)
            cache.looks = looks
            cached._path_cache = cache
            filled.append(cached)
    # This Python's import system must ask its cache as the notes expect: if it does not,
    # nothing is noted, and every listing stays whole.
    probe = "__memotest_probe__"
    try:
        filled[0].find_spec(probe)
        works = any(name.startswith(probe) for name in filled[0]._path_cache.looks)
    except Exception:
        works = False
    if not works:
        BLIND.append(None)
        return
    # Compiled as the import system's own code: an import error's traceback leaves it out.
    space = {"fill": fill, "Looked": Looked, "LOOKS": LOOKS, "absolute": absolute}
    exec(compile(FILL_SOURCE, "<frozen importlib._bootstrap_external>", "exec"), space)
    finder._fill_cache = space["_fill_cache"]
    sys.addaudithook(on_listing)


def listing_report(top, roots):
    """The folders inside ``top`` (the run's folder) but outside ``roots`` (the
    interpreter's) that only looking readers listed, each with ``[names, patterns]``;
    None when some listing cannot be attributed (``BLIND``)."""
    if BLIND:
        return None
    inside = os.path.join(top, "")
    out = {}
    for where in set(LOOKS) | set(PATTERNS):
        if where in WHOLE or not (where == top or where.startswith(inside)):
            continue
        if os.path.join(where, "").startswith(roots):
            continue
        out[where] = [sorted(LOOKS.get(where, ())), sorted(PATTERNS.get(where, ()))]
    return out


def finder_views(top, roots):
    """For the warm worker: the folders of the project (``top``) that only the import
    system listed, each with ``[the names it looked for, the entries among them it saw]``.
    They tell whether the worker's imports still hold when such a folder changes
    (``warm.py``)."""
    report = listing_report(top, roots) or {}
    views = {}
    for cached in list(sys.path_importer_cache.values()):
        cache = getattr(cached, "_path_cache", None)
        if type(cache) is not Looked:
            continue
        where = absolute(cached.path)
        if where not in report or report[where][1]:
            continue  # listed by another reader too
        seen = sorted(n for n in cache if n in cache.looks)
        if views.setdefault(where, seen) != seen:
            views[where] = None  # two caches of it saw it differently
    return {w: [sorted(LOOKS[w]), seen] for w, seen in views.items() if seen is not None}
