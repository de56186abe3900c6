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
  ``*.dist-info/entry_points.txt`` of every folder of ``sys.path``), and ``Path.glob``
  likewise (pytest looks for ``test*`` folders at its rootdir);
* code a plugin knows (its ``listing`` in ``extensions.py``): a test runner's collection
  on its way down to the file it is given, say.

An audit hook sees every listing made through Python's ``os.listdir`` and ``os.scandir``
and who made it, and each import-system listing notes every name asked of it. A folder of
the project that only such readers listed, and only in the run's own process (and the
worker's), is then an input by those of its entries that match what they looked for
(``Kind.ENTRIES``): a new ``py.typed``, a ``.pre-commit-config.yaml`` or a renamed
``CHANGES.md`` re-runs nothing, a new module that an import would now find first re-runs
what imported it. Any other listing of the folder, by Python code or by another process,
keeps it whole. A listing by a descriptor (``shutil.rmtree``, ``os.fwalk``) keeps the
folder it is open on whole; one whose folder cannot be told keeps all whole.

A child forked from the process (``os.fork``: multiprocessing's default start, a test
forking) inherits the import system's caches of the folders listed so far, and looks for
names in them that no report of the process holds. So at a fork (:func:`watch_forks`) the
folders listed until then become whole, and the child's own report says nothing (it is
``BLIND``): the folders it lists stay whole. ``subprocess`` forks without calling Python's
fork handlers, then executes another image: that is another process, whose listings the
shim reports under its own pid.

The same watch runs in two kinds of processes: a warm worker (installed before the
worker imports anything, ``serve.py``; each forked run reports through the worker), and
the plain pytest process of a tox env, a nox session or a targets file's ``python -m
pytest`` (installed at the interpreter's start-up by the ``sitecustomize.py`` of
``plugins/memotest_pytest/walk_path/``, with ``late``: the ``.pth`` files ran before;
else by ``memotest_walk`` as pytest imports it; the process reports at exit to the
folder memotest names, ``memotest/tracer/listing_reports.py``).

What this rests on: that C code in the run's own process (a C extension calling
``opendir``) does not list a folder of the project, which the audit hook cannot see;
that what a plugin says a lister looks for is all it uses of the listing; and that
nothing lists a folder before the hook is installed but the import system (the
interpreter's start-up; in a plain pytest process whose ``sitecustomize`` did not run,
also pytest's own start-up before it imports its ``-p`` plugins, which stats files but
lists no folder, and the ``-p`` plugins of ``addopts``, imported just before).
"""

import os
import sys

from . import audit, extensions

#: Folder -> the names looked for in it (exact entry names).
LOOKS = {}
#: Folder -> the patterns looked for in it (``fnmatch``; ``i:`` before a pattern: matched
#: against the name in lower case).
PATTERNS = {}
#: Folders some other reader listed: every entry counts.
WHOLE = set()
#: Not empty when some listing cannot be attributed (a folder listed by a file descriptor
#: whose folder cannot be told, a forked child, or an import system that does not ask its
#: cache as the notes expect): all stay whole.
BLIND = []

#: The pattern of every entry an import could take for a module (``inputs/entries.py``):
#: a name with no dot (a package, a namespace package), or a name with no dot followed by
#: one of the import system's suffixes, which follow the prefix separated by spaces.
IMPORTABLE = "m:"
METADATA_FILES = ("/importlib/metadata/__init__.py", "/importlib_metadata/__init__.py")
DIST_PATTERNS = ("i:*.dist-info", "i:*.egg-info", "i:egg-info")
FILL = []  # the import system's own FileFinder._fill_cache, then its code
#: The frame of the import system's code in a traceback: an import error leaves it out.
BOOTSTRAP_FILE = "<frozen importlib._bootstrap_external>"


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


def folder_of(fd):
    """The folder the descriptor ``fd`` is open on, as the shim writes it; None when that
    cannot be told (a folder deleted since, or no ``/proc``)."""
    try:
        where = os.readlink(f"/proc/self/fd/{int(fd)}")
    except (OSError, TypeError, ValueError):
        return None
    if not where.startswith("/") or where.endswith(" (deleted)"):
        return None
    return os.path.normpath(where)


def metadata_listing(where, frame):
    """``importlib.metadata`` looking for distributions: their ``*.dist-info`` and
    ``*.egg-info`` entries."""
    code = frame.f_code
    if code.co_name == "children" and code.co_filename.endswith(METADATA_FILES):
        return (), DIST_PATTERNS
    return None


def glob_listing(where, frame):
    """``glob`` matching one folder level against one pattern: that pattern."""
    code, up = frame.f_code, frame.f_back
    if code.co_name != "_iterdir" or not code.co_filename.endswith("/glob.py") or up is None:
        return None
    top = up.f_back
    if up.f_code.co_name == "_listdir" and top is not None and top.f_code.co_name == "_glob1":
        pattern = top.f_locals.get("pattern")
        if isinstance(pattern, bytes):
            pattern = os.fsdecode(pattern)
        if isinstance(pattern, str):
            return (), (literal(pattern),)
    return None


def literal(pattern):
    """A reader's ``fnmatch`` pattern as the ``entries`` record keeps it: one that starts
    like a kind of pattern of its own (``d:``, ``i:``, ``m:``, ``inputs/entries.py``)
    gets its first letter in brackets, which matches that letter alone."""
    if pattern[1:2] == ":" and pattern[:1] in ("d", "i", "m"):
        return "[" + pattern[0] + "]" + pattern[1:]
    return pattern


#: The files of ``pathlib`` (3.13 made it a package).
PATHLIB_FILES = ("/pathlib.py", "/pathlib/_local.py", "/pathlib/_abc.py", "/glob.py")


def pathlib_glob_listing(where, frame):
    """``Path.glob`` matching one folder level against one pattern of names (pytest looks
    for ``test*`` folders at its rootdir so): that pattern. Only through ``pathlib``'s own
    code between the listing and ``glob``, and a case-sensitive match."""
    for _ in range(8):
        code = frame.f_code
        if not code.co_filename.endswith(PATHLIB_FILES):
            return None
        if code.co_name == "glob" and not code.co_filename.endswith("/glob.py"):
            pattern = frame.f_locals.get("pattern")
            if frame.f_locals.get("case_sensitive") not in (None, True):
                return None
            if not isinstance(pattern, str) or "/" in pattern or "**" in pattern:
                return None
            return (), (literal(pattern),)
        frame = frame.f_back
        if frame is None:
            return None
    return None


#: Who may list a folder only to look for certain names, asked in order; then plugins.
LISTERS = (metadata_listing, glob_listing, pathlib_glob_listing)


def on_listing(args, frame):
    """The watcher of ``os.listdir`` and ``os.scandir``: who listed which folder."""
    path = args[0] if args else None
    if isinstance(path, int):
        # A folder listed by a descriptor (``shutil.rmtree``'s walk, ``os.fwalk``): the
        # folder it names now, listed by a reader that looks at every entry.
        where = folder_of(path)
        if where is None:
            BLIND.append(path)
        else:
            WHOLE.add(where)
        return
    where = absolute(path)
    if FILL and frame.f_code is FILL[1]:
        return  # the import system: the names asked of its cache are noted (Looked)
    for lister in (*LISTERS, *extensions.each("listing")):
        found = lister(where, frame)
        if found is not None:
            names, patterns = found
            if names or not patterns:
                LOOKS.setdefault(where, set()).update(names)
            if patterns:
                PATTERNS.setdefault(where, set()).update(patterns)
            return
    WHOLE.add(where)


def _fill_cache(self):
    """The import system's ``FileFinder._fill_cache``, whose cache then notes what is
    asked of it (compiled as the import system's own code: see :func:`watch_listings`)."""
    FILL[0](self)
    cache = Looked(self._path_cache)
    cache.looks = LOOKS.setdefault(absolute(self.path), set())
    self._path_cache = cache


def watch_listings(late=False):
    """Installs the watcher and makes every ``FileFinder`` cache note what is asked
    of it. The folders the import system listed before (the interpreter's start-up) are
    taken to have been asked for every module imported so far, and for ``site``'s two.
    ``late``: installed after more than the interpreter's start-up ran (a plain pytest
    process: at ``sitecustomize``, after the ``.pth`` files, whose imports tried ``nt``
    and ``_winapi``; or at ``memotest_walk``, after pytest's start-up tried
    ``org.python.core``, ``msvcrt``),
    so those folders are also taken to have been asked for every name an import could
    take (:data:`IMPORTABLE`); and every folder of ``sys.path`` to have been listed by
    ``importlib.metadata`` (pytest looks for the plugins' distributions to rewrite their
    asserts before it imports its ``-p`` plugins). Not ``late`` (a worker, started by
    ``python -c``), the folders of ``sys.path`` but the current one (``''``, put there
    after ``site``) are held so too when listed already: ``site`` ran the ``.pth`` files'
    code, whose failed imports (``nt``, ``_winapi``: an editable install's finder imports
    ``pathlib``) no cache noted."""
    import importlib.machinery
    from importlib import _bootstrap_external as bootstrap

    finder = bootstrap.FileFinder
    fill = finder._fill_cache
    FILL.extend((fill, fill.__code__))
    suffixes = ["", *importlib.machinery.all_suffixes()]
    suffixed = " ".join(suffixes[1:])
    early = set()
    ours = __name__.rpartition(".")[0]  # the worker's own modules: no import looked for them
    for module in [*sys.modules, "sitecustomize", "usercustomize"]:
        if module == ours or module.startswith(ours + "."):
            continue
        tail = module.rpartition(".")[2]
        early.update(tail + suffix for suffix in suffixes)
    filled = []
    at_site = set()  # the folders the .pth files' code may have looked in
    if "site" in sys.modules:
        at_site = {absolute(e) for e in sys.path if isinstance(e, str) and e}
    if late:
        for entry in sys.path:
            if isinstance(entry, str):
                PATTERNS.setdefault(absolute(entry), set()).update(DIST_PATTERNS)
    for cached in list(sys.path_importer_cache.values()):
        if type(cached) is finder and cached._path_mtime != -1:
            looks = LOOKS.setdefault(absolute(cached.path), set())
            looks.update(early)
            if late or absolute(cached.path) in at_site:
                PATTERNS.setdefault(absolute(cached.path), set()).add(IMPORTABLE + suffixed)
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
    _fill_cache.__code__ = _fill_cache.__code__.replace(co_filename=BOOTSTRAP_FILE)
    finder._fill_cache = _fill_cache
    audit.watch("os.listdir", on_listing)
    audit.watch("os.scandir", on_listing)


def _forking():
    """Before a fork, in the parent: the child looks in the caches of every folder listed
    so far, and reports nothing of it."""
    WHOLE.update(LOOKS)
    WHOLE.update(PATTERNS)


def _forked():
    """After a fork, in the child: its report says nothing (:func:`listing_report`)."""
    BLIND.append("forked")


def watch_forks():
    """From now on, a fork makes every folder listed so far whole, and the child blind.
    Called in the process that reports (a worker's run, a plain pytest process), not in a
    worker, whose forks are the runs."""
    os.register_at_fork(before=_forking, after_in_child=_forked)


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


def report_at_exit(folder, roots):
    """A plain process's report (a pytest under tox or nox, a BUILD file's py_test): at
    its exit, ``folder/PID.json`` holds :func:`listing_report` of its folder, written
    whole (``tracer/listing_reports.py`` reads it). A forked child writes none."""
    import atexit
    import json

    pid, top = os.getpid(), absolute(os.getcwd())

    def report():
        if os.getpid() != pid:
            return  # a forked child: not this process
        try:
            data = json.dumps({"pid": pid, "listings": listing_report(top, roots)})
            path = os.path.join(folder, str(pid) + ".json")
            with open(path + ".part", "w") as f:
                f.write(data)
            os.rename(path + ".part", path)
        except Exception:
            pass

    atexit.register(report)


def finder_views(top, roots):
    """The folders of the project (``top``) that only the import system listed, each
    with ``[the names it looked for, the entries among them it saw]``. They tell whether
    the worker's imports still hold when such a folder changes (``tracer/warm``)."""
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
