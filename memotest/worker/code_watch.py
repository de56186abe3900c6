"""The code a run executed, from the project's Python files that only an import read.

The run's process notes every code object it evaluates (on Python 3.12+ through
``sys.monitoring``, ``monitored.py``; before, the ``_executed`` extension, loaded by path
when memotest's Python compiles as this one does). At the run's end this module reports,
for each ``.py`` file of the project (:func:`project_file`: outside the interpreter's
folders and installed distributions) that the import system read and nothing else
opened, the code objects of it that ran (``codes.check``): memotest then holds the file by
that code (``memotest/inputs/code.py``). A file opened otherwise (a test calling its
loader's ``get_code`` included), or stat'ed through ``os`` (its size and times:
:func:`noting`), stays whole. Or it says why that cannot be told, and the files stay
whole: something else took over noting the code, the run forked a Python process (code
ran where this one cannot see it), a thread was still running, or a plugin says so
(``keep_whole`` in ``extensions.py``). Code whose ``__code__`` was read without running
it (``dis``, ``numba``, ``inspect.signature``) counts as run.
"""

import os
import sys
from itertools import compress
from operator import attrgetter

from . import audit, call_lines, class_lines, defaults_seen, extensions
from .codes import check, qualname
from .interpreter import threads

_FILENAME = attrgetter("co_filename")
_NAME = attrgetter("co_name")
_MODULE = "<module>"
OPENED = set()  # .py files opened or stat'ed other than by an import
OPENERS = {}  # such a file -> the files of the code that opened or stat'ed it
FORKED = []  # the run forked (the worker's own forks: prepared_code.forked)
INSPECTED = []  # code objects whose function's __code__ was read: they count as run
WITHIN = []
GET_DATA = []  # the import system's FileLoader.get_data and SourceLoader.get_code
EXECUTED = []  # the extension, while it notes the run's code
#: Phases (see :func:`phase`): label -> the code objects that ran while it was current;
#: the label now current; label -> the labels whose code it counts as its own.
PHASES = {}
CURRENT = [""]
USES = {}
#: Non-empty when the run labels its phases and who read its files (``OPENERS``): only
#: in a build that may select tests (``job["phases"]``). Else the code is noted once.
PHASING = []
#: label -> the code objects whose ``__code__`` was read while it was current (counted
#: as run; kept apart so that the global part can tell them from code that ran).
PEEKED = {}
SEEN_INSPECTED = [0]
#: The files of the modules the worker imported (memotest's own among them): not the
#: project's in any part (``phases.phase_report``); but those its preparation imported while
#: noting the code (``PREPARED``; what of the project's ran then: ``prepared_code.py``).
WORKERS, PREPARED, PREPARED_CODES = set(), set(), []
#: The quiet offsets of the module bodies the preparation ran (:func:`module_quiet`),
#: found in the worker once it ended (:func:`quiet_prepared`): id(module code) -> (its
#: module's namespace, the offsets); each run takes them for that module if it is still
#: the one of that file, instead of reading their bytecode again.
PREPARED_QUIET = {}
#: The ``codes.check`` of each code object of ``PREPARED_CODES``, found in the worker
#: (:func:`quiet_prepared`): a pure function of the code object, which every run would
#: compute again for its report; ``PREPARED_CODES`` keeps the objects, so no id is reused.
PREPARED_CHECKS = {}


def on_code_read(args, frame):
    """The watcher of ``object.__getattr__``: a function's ``__code__`` read, its
    defaults read, a frame's code read."""
    if len(args) != 2 or WITHIN:
        return
    name = args[1]
    if name not in ("__code__", "__defaults__", "__kwdefaults__", "f_code"):
        return
    WITHIN.append(True)
    try:
        if name == "__code__":
            INSPECTED.append(args[0].__code__)
        else:
            defaults_seen.read(name, args[0])
    except Exception:
        if name != "__code__":
            defaults_seen.GC_READ.append(True)  # not told apart: no default goes unseen
    finally:
        WITHIN.clear()


STDLIB = [os.path.join(os.path.dirname(os.__file__), "")]
#: Folders inside the standard library's that are not it: an interpreter outside a
#: virtual environment keeps its installed packages there (``lib/python3.11/site-packages``).
INSTALLED = ("site-packages/", "dist-packages/")


def in_stdlib(name):  # the code file ``name`` is the standard library's
    return name.startswith(STDLIB[0]) and not name[len(STDLIB[0]) :].startswith(INSTALLED)


#: Each code file's answer for :func:`caller`: whether it looks past its frames.
PASSED = {}


def caller(frame):
    """The file of the first code up ``frame``'s stack outside the standard library
    (``pathlib``'s ``read_text`` is not who read the file, its caller is)."""
    while frame is not None:
        name = frame.f_code.co_filename
        passed = PASSED.get(name)
        if passed is None:
            passed = in_stdlib(name) or name == __file__ or name.startswith("<frozen")
            PASSED[name] = passed
        if not passed:
            return name
        frame = frame.f_back
    return "?"


def note(path, by="?"):
    """A ``.py`` file the run looked at other than through an import (``by``: the file
    of the code that did, ``?`` when not looked for): it stays whole."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if isinstance(path, str) and path.endswith(".pyc"):
        path = source_of_bytecode(path)
    if isinstance(path, str) and path.endswith(".py"):
        path = os.path.normpath(path) if os.path.isabs(path) else os.path.basename(path)
        OPENED.add(path)
        OPENERS.setdefault(path, set()).add(by)


def source_of_bytecode(path):
    """The source of a cached bytecode file (``pkg/__pycache__/a.cpython-311.pyc``, pytest's
    ``a.cpython-311-pytest-9.0.3.pyc``: ``pkg/a.py``), else ``path``: a loader's
    ``get_code`` hands out the ``.pyc``'s code objects without reading the source."""
    folder, name = os.path.split(path)
    if os.path.basename(folder) != "__pycache__":
        return path
    return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")


def phase(label):
    """Attributes the code the run executes from now on to ``label`` (until the next
    call), and returns the label that was current. A test runner's plugin calls it
    around each test and each fixture (``memotest_pytest/attribute.py``): the code of a
    phase is what that part of the run executed. The label ``""`` (the start) holds
    what ran outside every labelled phase (imports, collection, the end). None when the
    run does not note its code or labels no phases (:data:`PHASING`)."""
    if not EXECUTED or not PHASING:
        return None
    before = CURRENT[0]
    try:
        codes = EXECUTED[0].phase()
    except Exception:
        return None
    PHASES.setdefault(before, []).extend(codes)
    mine = PEEKED.setdefault(before, [])
    inspected = INSPECTED[SEEN_INSPECTED[0] :]
    SEEN_INSPECTED[0] = len(INSPECTED)
    while inspected:  # read, so counted as run, with the code objects it holds
        code = inspected.pop()
        mine.append(code)
        inspected.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    CURRENT[0] = label
    return before


def uses(label, others):
    """The code of the phases ``others`` counts as ``label``'s too (a test's fixtures,
    whichever test's setup ran them)."""
    if not PHASING:
        return
    USES.setdefault(label, set()).update(others)


def on_open(args, frame):
    """The watcher of ``open``: a ``.py`` file opened other than by the import system
    reading a module's source to run it (``get_data`` called by ``get_code`` called by
    ``exec_module``: a test calling ``loader.get_code`` gets code objects it can read
    without running them)."""
    if not args:
        return
    up = frame.f_back
    top = up.f_back if up is not None else None
    if (
        frame.f_code is GET_DATA[0]
        and up is not None
        and up.f_code is GET_DATA[1]
        and top is not None
        and top.f_code is GET_DATA[2]
    ):
        return  # the import system reading a module's source
    note(args[0], caller(frame) if PHASING else "?")


#: The names :func:`note` keeps: a source file, or its cached bytecode.
NOTED, NOTED_BYTES = (".py", ".pyc"), (b".py", b".pyc")
PROBED = []  # untimed.within_probe: a stat inside a yes-or-no probe shows no size or time
READERS = ("get_data", "get_code", "exec_module")  # the import system's, for GET_DATA


def noting(real):
    """``os.stat`` or ``os.lstat``, noting the ``.py`` files stat'ed through ``os``: a
    stat shows a file's size and times, which no code digest holds. The import system
    calls ``posix`` itself, and ``os.path.isfile``, ``Path.exists``... (wrapped by
    ``untimed.py``) hand back a yes or no: their stats are not noted."""

    def stat(path, *args, **kwargs):
        if isinstance(path, (str, bytes, os.PathLike)):
            name = os.fspath(path)
            # what :func:`note` takes (its caller only for each test's map: ``PHASING``)
            if name.endswith(NOTED if isinstance(name, str) else NOTED_BYTES) and not (
                PROBED and PROBED[0](sys._getframe(1), in_stdlib)  # a yes or no: untimed.py
            ):
                note(name, "os.stat:" + caller(sys._getframe(1)) if PHASING else "?")
        return real(path, *args, **kwargs)

    stat.__name__ = stat.__qualname__ = real.__name__
    stat.__doc__ = real.__doc__
    return stat


def watch_code():
    """Starts watching what tells the code a run executed apart from what it read (once,
    before forking runs)."""
    from importlib import _bootstrap_external as bootstrap

    if GET_DATA:
        return
    loaders = (bootstrap.FileLoader, bootstrap.SourceLoader, bootstrap._LoaderBasics)
    GET_DATA.extend(getattr(c, n).__code__ for c, n in zip(loaders, READERS, strict=True))
    from . import untimed  # loaded after this module

    PROBED.append(untimed.within_probe)
    os.stat, os.lstat = noting(os.stat), noting(os.lstat)
    audit.watch("object.__getattr__", on_code_read)
    for event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        audit.watch(event, lambda args, frame: WITHIN or defaults_seen.GC_READ.append(True))
    audit.watch("open", on_open)
    os.register_at_fork(before=lambda: FORKED.append(True))


INSTALLED_PARTS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")  # libraries'


def project_file(path, where):
    """Whether the code file ``path`` is one of the project's ``.py`` files: any source
    file outside the interpreter's own folders (``where``) and those of installed
    distributions, not only under the run's folder or the repository (noting by the code
    that ran is as sound for a checkout on ``PYTHONPATH``)."""
    return (
        isinstance(path, str)
        and path.endswith(".py")
        and os.path.isabs(path)
        and not os.path.normpath(path).startswith(where)
        and not any(part in path for part in INSTALLED_PARTS)
    )


def code_report(executed, had, where):
    """The code objects this run executed from the project's ``.py`` files that an
    import read, and only an import: ``{path: [[qualified name, first line, check],
    ...]}``; or why that cannot be told. ``had``: the modules the worker had imported;
    ``where``: the interpreter's folders."""
    import importlib.machinery

    if EXECUTED:
        phase("")  # the last phase's code
        del EXECUTED[:]
    codes, intact = executed.stop()
    codes.extend(PREPARED_CODES)
    if not intact:
        return "something else took over noting the code run"
    if FORKED:
        return "it forked a Python process"  # code ran where this one cannot see it
    if threads() != 1:
        return "a thread was still running at its end"
    for keep_whole in extensions.each("keep_whole"):
        why = keep_whole(codes)
        if why:
            return why
    excluded = extensions.each("excluded")
    sources = set()
    namespaces = {}  # origin -> its module's namespace
    for name, module in list(sys.modules.items()):
        try:
            namespace = object.__getattribute__(module, "__dict__")
            spec = namespace.get("__spec__")
        except Exception:
            continue
        origin = getattr(spec, "origin", None)
        loader = getattr(spec, "loader", None)
        worker = name in had and name not in PREPARED
        if worker:  # its code ran in the worker too: no part's alone
            path = namespace.get("__file__") or origin  # the worker's own have no spec
            if isinstance(path, str):
                WORKERS.add(os.path.normpath(path))
        if worker or type(loader) is not importlib.machinery.SourceFileLoader:
            continue
        if not isinstance(origin, str) or any(exclude(origin) for exclude in excluded):
            continue
        if (
            project_file(origin, where)
            and os.path.normpath(origin) not in OPENED
            and os.path.basename(origin) not in OPENED
        ):
            sources.add(origin)
            # A file imported as two modules: which one a class statement made is unknown.
            namespaces[origin] = None if origin in namespaces else namespace
    found = {}
    inspected = list(INSPECTED)
    counted = set()  # pytest reads the __code__ of the same functions again and again
    while inspected:
        code = inspected.pop()
        if id(code) in counted:
            continue
        counted.add(id(code))
        codes.append(code)
        inspected.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    quiet = quiet_classes(codes, namespaces)
    # The project's code objects picked by file name in C: the others (pytest's, the
    # standard library's) are most of the thousands a run executes.
    ours = compress(codes, map(sources.__contains__, map(_FILENAME, codes)))
    for code in {id(c): c for c in ours}.values():
        # Keyed as the trace names it (``pythonpath = ..`` in ``tests/pytest.ini``
        # imports ``tests/../pkg/a.py``).
        entry = [qualname(code), code.co_firstlineno, PREPARED_CHECKS.get(id(code)) or check(code)]
        if id(code) in quiet:
            entry.append(quiet[id(code)])
        found.setdefault(os.path.normpath(code.co_filename), []).append(entry)
    return found


def quiet_classes(codes, namespaces):
    """``{id(code): [offset, ...]}``: the instructions of the module bodies that ran (of
    the files ``namespaces`` maps to their module's namespace) and of their class bodies
    during which no Python code ran but a class body's (``class_lines.quiet_offsets``),
    or C code only (``call_lines.quiet_offsets``: of generator expressions too)."""
    out = {}
    WITHIN.append(True)  # what it reads of abc's code is not the run's
    try:
        for code in compress(codes, map(_MODULE.__eq__, map(_NAME, codes))):
            space = namespaces.get(code.co_filename)
            if not isinstance(space, dict):
                continue
            done = PREPARED_QUIET.get(id(code))
            found = done[1] if done is not None and done[0] is space else None
            for c, offsets in module_quiet(code, space) if found is None else found:
                out[id(c)] = [*out.get(id(c), ()), *offsets]
        for code, unseen in defaults_seen.unseen(codes, namespaces).items():
            out[id(code)] = [*out.get(id(code), ()), *(-1 - x for x in unseen)]
    finally:
        WITHIN.clear()
    return out


def module_quiet(code, space):
    """``[(code, [offset, ...]), ...]`` of the module body ``code`` whose module's namespace
    is ``space``: its class statements' and class bodies' (``class_lines``), then its
    calls of C code only (``call_lines``); none if the class statements cannot be read.
    The callers keep what it reads of code from counting as run (``WITHIN``)."""
    try:
        found = list(class_lines.quiet_offsets(code, space).items())
    except Exception:
        return []
    try:
        calls = call_lines.quiet_offsets(code, space)
    except Exception:
        return found
    return [*found, *calls]


def quiet_prepared(where):
    """In the worker, once its preparation ended: :data:`PREPARED_QUIET` of the module
    bodies it ran of the project's files (``where``: the interpreter's folders), as
    :func:`code_report` takes them. Read then, their classes and names are as the module
    bodies left them, not as a run may have changed them since."""
    import importlib.machinery

    excluded = extensions.each("excluded")
    namespaces = {}
    for name in PREPARED:
        try:
            namespace = object.__getattribute__(sys.modules[name], "__dict__")
            spec = namespace.get("__spec__")
        except Exception:
            continue
        origin = getattr(spec, "origin", None)
        if type(getattr(spec, "loader", None)) is not importlib.machinery.SourceFileLoader:
            continue
        if not isinstance(origin, str) or any(exclude(origin) for exclude in excluded):
            continue
        if project_file(origin, where):
            namespaces[origin] = None if origin in namespaces else namespace
    WITHIN.append(True)  # what it reads of abc's code is no run's
    try:
        for code in compress(PREPARED_CODES, map(_MODULE.__eq__, map(_NAME, PREPARED_CODES))):
            space = namespaces.get(code.co_filename)
            if isinstance(space, dict):
                PREPARED_QUIET[id(code)] = (space, module_quiet(code, space))
            defaults_seen.remember_sites(code)
        for code in PREPARED_CODES:
            PREPARED_CHECKS[id(code)] = check(code)
    finally:
        WITHIN.clear()
