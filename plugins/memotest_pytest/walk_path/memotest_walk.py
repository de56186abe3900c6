"""A pytest plugin that keeps pytest's collection from stat'ing the entries it walks past.

memotest loads it into the pytest commands it memoizes for other tools (a tox env's
``pytest ...`` or ``python -m pytest ...``, a nox session's ``session.run("pytest", ...)``):
``memotest_pytest.walk`` adds ``-p memotest_walk`` to the command and this folder (which
holds this one module) to ``PYTHONPATH``, since the env's Python may not have memotest
installed. So it imports nothing but the standard library and pytest.

Why: since pytest 8, ``pytest tests/test_a.py`` (or ``pytest tests``) makes a node for every
entry of every folder from the rootdir down to the path given, stat'ing each one (and
looking for ``ENTRY/pyvenv.cfg``, its virtualenv check), then keeps only the nodes on the
way to the path and throws the others away uncollected. memotest fingerprints what a
command stat'ed, so those stats would make ``README.md``, ``CHANGES.md`` and every other
file at the rootdir an input of the env: editing them would re-run its tests although
pytest only walked past them. Here ``pytest_ignore_collect`` answers "ignore" for an entry
that is neither a path given, nor inside one, nor a folder on the way to one, before
pytest's own check stats it: exactly the entries pytest would have thrown away. The
folders are still listed, so an entry added or removed there is still seen.

This is the walk part of ``memotest_pytest.narrow`` (memotest's own ``--pytest`` targets)
and nothing else: exit codes, outputs and which tests run are pytest's own. It stands
aside with ``--pyargs``, when a path given does not exist, with
``MEMOTEST_PYTEST_NARROW=0`` in the environment, and on a pytest older than 7.0 (whose
hook has another signature, and which does not walk the rootdir that way).

It also watches what the process's listings looked for (:func:`watch_listings`), so that
a folder of the project listed only by the import system and such readers is held by the
entries they looked for, not by all of them: a ``.benchmarks`` a plugin makes in the
current folder after the import system listed it does not re-run the tests; a new module an
import would now find first does. The watch is ``memotest/worker/listings.py``, the warm
worker's own: memotest puts its text (and that of the modules it needs, and of plugins'
``listing`` functions) in the run's trace folder and names the report folder in
``MEMOTEST_LISTINGS`` (``memotest/tracer/listing_reports.py``); the modules are made as
the worker makes them (``memotest/worker/boot.py``). It is started at the interpreter's
start-up by this folder's ``sitecustomize.py``, before the program puts the current folder
on ``sys.path``; this module then only adds the report at exit. When that did not run
(a ``sitecustomize`` of the user's first on ``sys.path``, ``python -S``), it is installed
when pytest imports this module for ``-p memotest_walk`` (the first ``-p`` of the command
line, after those of ``addopts`` and ``PYTEST_ADDOPTS``: pytest imports those before the
entry-point plugins, ``PYTEST_PLUGINS`` and any ``conftest.py``), and only then; what
pytest's start-up looked for before is counted as ``watch_listings(late=True)`` says.
Either way the report is written only by a process that imported this module for its
``-p``; a process that reports nothing (killed, or the watch could not be installed)
leaves every folder it listed whole.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

#: The folder of the reports, from memotest (``memotest/tracer/listing_reports.py``).
REPORTS = "MEMOTEST_LISTINGS"

#: ``MEMOTEST_PYTEST_NARROW=0``: collect as pytest does by itself.
SWITCH = "MEMOTEST_PYTEST_NARROW"


def given_paths(config: pytest.Config) -> tuple[Path, ...] | None:
    """The paths pytest collects, absolute: those given, else its ``testpaths``, else the
    current folder (nothing to narrow then); None when the walk must not be narrowed."""
    if os.environ.get(SWITCH, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    if config.getoption("pyargs", False) or not config.args:
        return None
    here = config.invocation_params.dir
    paths = [Path(os.path.abspath(here / str(a).split("::", 1)[0])) for a in config.args]
    return tuple(paths) if paths and all(p.exists() for p in paths) else None


def on_the_way(path: Path, given: tuple[Path, ...]) -> bool:
    """Whether ``path`` is a path given, inside one, or a folder on the way to one."""
    return any(path == g or g in path.parents or path in g.parents for g in given)


#: The hooks that decide what a folder's entries collect.
COLLECTION_HOOKS = ("pytest_collect_file", "pytest_collect_directory", "pytest_ignore_collect")
#: Every entry whose name does not start with a dot (a folder pytest goes into, any file).
UNDOTTED = "[!.]*"


def _module(plugin: object) -> str:
    name = getattr(plugin, "__name__", None)
    return name if isinstance(name, str) else type(plugin).__module__


def standard_collection(config: pytest.Config) -> bool:
    """Whether pytest's own hooks alone decide what the entries of a folder collect: no
    other plugin or ``conftest.py`` loaded so far implements a hook of
    :data:`COLLECTION_HOOKS` (a folder's own conftests are loaded before it is listed), and
    ``norecursedirs`` keeps ``.*`` (pytest does not go into a folder named with a dot)."""
    hook = config.pluginmanager.hook
    for name in COLLECTION_HOOKS:
        for impl in getattr(hook, name).get_hookimpls():
            module = _module(impl.plugin)
            if not (module.startswith("_pytest.") or module == __name__):
                return False
    return ".*" in config.getini("norecursedirs")


def collect_patterns(config: pytest.Config) -> tuple[str, ...] | None:
    """The entries of a folder pytest collects whole that can change what it collects,
    as ``fnmatch`` patterns of their names: every name without a leading dot, and the
    names pytest's own hooks collect (``python_files``, the doctest globs, ``*.py`` with
    ``--doctest-modules``, ``conftest.py``, ``__init__.py``). A new ``.coverage`` or
    ``.benchmarks`` is none of them: under :func:`standard_collection` pytest collects
    nothing from it. None when that cannot be said."""
    try:
        if not standard_collection(config):
            return None
        patterns = {UNDOTTED, "__init__.py", "conftest.py", *config.getini("python_files")}
        patterns.update(config.getoption("doctestglob") or ["test*.txt"])
        if config.getoption("doctestmodules", False):
            patterns.add("*.py")
    except Exception:
        return None
    if not all(isinstance(p, str) and "/" not in p and os.sep not in p for p in patterns):
        return None  # a pattern of paths, not of names
    return tuple(sorted(patterns))


def walked_file(path: Path) -> bool:
    """Whether pytest's collection of a folder asks about ``path`` as one of its regular
    files (its ``DirEntry``, whose type pytest read from the listing, without a ``stat``)."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "collect" and code.co_filename.endswith(COLLECTORS):
            entry = frame.f_locals.get("direntry")
            try:
                return Path(entry.path) == path and not entry.is_dir() and entry.is_file()
            except Exception:
                return False
        frame = frame.f_back
    return False


#: pytest's collectors of folders (``Dir``, ``Package``).
COLLECTORS = ("/_pytest/main.py", "/_pytest/python.py")


def collects_nothing(path: Path, config: pytest.Config) -> bool:
    """Whether ``path``, a regular file of a folder pytest collects whole, is one pytest's
    own hooks collect nothing from (its name matches no pattern of :func:`collect_patterns`
    but the undotted one). pytest would stat it (its checks of folders and virtualenvs)
    and then drop it: ignoring it first keeps ``CHANGES.md`` from being an input."""
    # Again when a plugin or conftest was registered since: it may collect more.
    plugins = len(config.pluginmanager.get_plugins())
    seen, collecting = config.stash.get(_COLLECTING, (-1, None))
    if seen != plugins:
        patterns = collect_patterns(config)
        collecting = None if patterns is None else [p for p in patterns if p != UNDOTTED]
        config.stash[_COLLECTING] = (plugins, collecting)
    if collecting is None:
        return False
    name = path.name
    return not any(fnmatch.fnmatchcase(name, p) for p in collecting) and walked_file(path)


if int(pytest.__version__.split(".", 1)[0]) >= 7:
    _GIVEN = pytest.StashKey["tuple[Path, ...] | None"]()  # a string: Python 3.8 envs
    #: The plugins registered when it was taken, and the patterns of the names pytest's
    #: own hooks collect (:func:`collect_patterns` but the undotted one).
    _COLLECTING = pytest.StashKey["tuple[int, list[str] | None]"]()

    @pytest.hookimpl(tryfirst=True)  # before conftests' own, and before pytest's stats
    def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
        if _GIVEN not in config.stash:
            config.stash[_GIVEN] = given_paths(config)
        given = config.stash[_GIVEN]
        path = Path(os.path.abspath(collection_path))
        if given is None:
            return None  # pytest decides, as without this plugin
        if not on_the_way(path, given):
            return True
        if path not in given and any(g in path.parents for g in given):
            return True if collects_nothing(path, config) else None
        return None


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, which makes its storage
def pytest_configure(config: pytest.Config) -> None:
    """pytest-benchmark makes its storage folder (``.benchmarks``) with
    ``Path.mkdir(parents=True)`` and drops any ``OSError``: it cannot tell "absent" from
    "a directory", as ``exist_ok`` (``memotest/worker/untimed.py``). Told so to the
    shim (``memotest_shim_or_dir``): the folder a run leaves replays at the next build,
    a file there runs again (docs/limits.md, "A run's own leftovers")."""
    benchmark_storage_or_dir()


def benchmark_storage_or_dir() -> None:
    """:func:`pytest_configure`'s wrapping of pytest-benchmark's storage, where it is
    loaded; also ``memotest_pytest.narrow``'s, in memotest's own pytest runs (each
    ``--pytest`` target and the collection)."""
    if "pytest_benchmark" not in sys.modules:
        return
    try:
        import ctypes

        scope = ctypes.PyDLL(None).memotest_shim_or_dir
        from pytest_benchmark.storage.file import FileStorage
    except (ImportError, OSError, AttributeError):
        return  # no shim (not memotest's run), or another pytest-benchmark
    for name in ("__init__", "get"):
        real = FileStorage.__dict__.get(name)
        if callable(real) and not getattr(real, "__memotest_or_dir__", False):
            setattr(FileStorage, name, _or_dir(real, scope))


def _or_dir(real, scope):
    """``real`` inside the shim's ``scope`` (a depth: ``memotest_shim_or_dir``, ...)."""

    def method(*args, **kwargs):
        scope(1)
        try:
            return real(*args, **kwargs)
        finally:
            scope(-1)

    method.__memotest_or_dir__ = True  # type: ignore[attr-defined]
    method.__wrapped__ = real  # type: ignore[attr-defined]
    return method


@pytest.hookimpl(hookwrapper=True)  # around pytest-cov's, which starts coverage
def pytest_load_initial_conftests(early_config: pytest.Config):  # type: ignore[no-untyped-def]
    """pytest-cov starts coverage here, which erases its data file: ``CoverageData.erase``
    removes it with ``file_be_gone``, which drops ENOENT: it ends the same where the file
    was and where nothing was (a folder there raises). Told so to the shim
    (``memotest_shim_gone``: absent or not a directory), the data file a run leaves does
    not make the next run run again (docs/limits.md, "A run's own leftovers")."""
    if getattr(early_config.known_args_namespace, "cov_source", None):
        _gone_scope()
    yield


def _gone_scope() -> None:
    try:
        import ctypes

        scope = ctypes.PyDLL(None).memotest_shim_gone
        from coverage import sqldata
    except (ImportError, OSError, AttributeError):
        return
    real = getattr(sqldata, "file_be_gone", None)
    if callable(real) and not getattr(real, "__memotest_or_dir__", False):
        sqldata.file_be_gone = _or_dir(real, scope)


def importing_from_preparse() -> bool:
    """Whether pytest imports this module for a ``-p`` of its command line (or of
    ``addopts``): before the entry-point plugins and conftests."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "consider_preparse" and "_pytest" in code.co_filename:
            return True
        frame = frame.f_back
    return False


#: The watch's package (``memotest/worker/boot.py``), and the mark ``sitecustomize`` (this
#: folder's) sets on it: True once it started the watch at the interpreter's start-up,
#: False if that failed.
PACKAGE = "_memotest_worker"
STARTED = "memotest_started_at_site"


def watch_listings() -> None:
    """Installs memotest's listing watch in this process, and its report at exit; when
    this folder's ``sitecustomize`` started the watch already, only the report."""
    folder = os.environ.pop(REPORTS, None)  # the processes this one starts do not report
    if not folder or not importing_from_preparse():
        return
    package = sys.modules.get(PACKAGE)
    try:
        if package is not None:
            if getattr(package, STARTED, None) is not True:
                return  # the early watch failed half-way: no report, all stays whole
            package.untimed.install()  # yes-or-no probes from now on: untimed (untimed.py)
        else:
            package = _late_watch(folder)
            if package is None:
                return  # this import system cannot be watched: no report, all stays whole
    except Exception:
        return
    package.listings.report_at_exit(folder, package.interpreter.roots())


def _late_watch(folder: str) -> ModuleType | None:
    """The watch started now, after pytest's start-up (no ``sitecustomize`` of this folder
    ran: ``python -S``, or one of the user's came first): the watch's package, or None."""
    import json

    with open(os.path.join(folder, "watch.json"), "rb") as f:
        watch = json.loads(f.read())
    boot = {"__name__": "_memotest_boot"}
    exec(compile(watch["boot"][1], watch["boot"][0], "exec", dont_inherit=True), boot)
    package = boot["start_watch"](watch)  # late: after pytest's start-up
    package.untimed.install()  # yes-or-no probes from now on: untimed (untimed.py)
    return package if package.listings.FILL else None


watch_listings()
