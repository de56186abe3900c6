"""Python's yes-or-no path probes, told to the shim as untimed.

``os.path.exists``, ``isfile``, ``isdir``, ``islink``, ``lexists``, ``ismount``,
``samefile`` and ``pathlib.Path.exists``, ``is_file``, ``is_dir``... call ``stat`` and hand
their caller a yes or no: the file's times stay inside the call. The shim records every
``stat`` that found its path as ``T`` (its caller had the times, so the file is in the
run's modification-time order, ``memotest/inputs/order.py``); it cannot see what the caller
kept. :func:`install` wraps those functions so that the stats made inside them are
recorded ``S`` (found, no time) instead: the shim's ``memotest_shim_untimed`` raises this
thread's depth of untimed probes around the call (``memotest/_shim/core.c``). Where
nothing but the standard library can run inside (a string or a plain ``pathlib`` path,
no Python trace or profile function set), the wrapper raises the depth of yes-or-no
probes instead (``memotest_shim_probe``): the shim writes those stats ``p``, and a path
nothing else looked at is held by what is there (a file, a folder, a link), not by its
content (``memotest/inputs/probed.py``). ``samefile``, whose answer is the two files'
identity, stays untimed.

What is not wrapped stays timed: ``os.stat``, ``Path.stat``, ``os.path.getmtime`` and
every other call that hands back a ``stat_result`` or a time, ``DirEntry.is_file()`` (a C
type), and any name bound before :func:`install` ran (``from os.path import exists``):
they err on the side of holding. A probe followed by a timed stat of the same file (an
``exists()`` then a ``getmtime()``) records both, and the ``T`` keeps the file in the
order. Python code that runs inside a probe (a path object's ``__fspath__`` is called
before the probe starts; a signal handler or a trace function that runs during it is not)
has its stats counted as the probe's.

The same for the creations that end alike whether their folder was absent or already a
directory: ``os.makedirs(name, exist_ok=True)`` and ``pathlib.Path.mkdir(exist_ok=True)``
(with ``parents`` or not) make it or find it, and raise only where something else is.
Inside them (the shim's ``memotest_shim_or_dir``) a lookup that missed, and the ``mkdir``
that succeeded, are recorded ``Y`` (absent or a directory) instead of ``M`` (absent), so
that the folder a run leaves does not make the next run run again, while a file put
there does (``inputs/absent.py``). Without ``exist_ok`` a ``mkdir`` is a lock: its
success is the path's absence, held as such.

Loaded into the warm worker (``serve.py``, before it imports anything of the project) and
into the pytest processes memotest watches for tox and nox (``memotest_walk``, from its
``-p`` import on: pytest's probes of its ini files come before). Stand-alone: it imports
only the standard library.
"""

import os
import sys

#: The probes of ``os.path`` (``genericpath``/``posixpath`` on 3.10-3.13; ``isjunction``
#: from 3.12), and of ``pathlib``'s path classes (on ``Path`` up to 3.12, on
#: ``pathlib._abc.PathBase`` and ``Path`` from 3.13).
PATH_PROBES = ("exists", "isfile", "isdir", "islink", "lexists", "ismount", "isjunction")
PATH_PROBES_2 = ("samefile",)
PATHLIB_PROBES = (
    "exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "is_mount",
    "is_junction",
    "is_fifo",
    "is_socket",
    "is_block_device",
    "is_char_device",
    "samefile",
)
#: The attribute that marks a wrapper (so that installing twice wraps once).
MARK = "__memotest_untimed__"
INSTALLED = []  # the shim's function, once installed


def shim_scope(name="memotest_shim_untimed"):
    """The shim's scope function ``name`` (``memotest_shim_untimed``, ``_probe``,
    ``_or_dir``: depth change -> new depth), or None when no shim that has it is loaded
    into this process (then nothing is wrapped)."""
    try:
        import ctypes

        # PyDLL: the call keeps the GIL (it takes nanoseconds). No ``argtypes``: a Python
        # int goes as a C int anyway, and the checks would double the call's cost.
        return getattr(ctypes.PyDLL(None), name)
    except (ImportError, OSError, AttributeError):
        return None


def only_stdlib_inside():
    """Whether no Python code but the standard library's can run inside a probe called
    now: no trace or profile function is set (one runs at every frame of the probe's
    Python code, and may keep what a ``stat`` it makes shows)."""
    return sys.gettrace() is None and sys.getprofile() is None


def probe(real, scope, yes_no=None):
    """``real`` (a function of a path, or of two) with its stats untimed; with
    ``yes_no`` (the shim's probe scope), a probe whose answer is what is at the path."""

    def untimed(*args, **kwargs):
        # __fspath__ of a path object is the caller's code: run it before the probe
        args = tuple(a if isinstance(a, (str, bytes, int)) else _fspath(a) for a in args)
        around = yes_no if yes_no is not None and only_stdlib_inside() else scope
        around(1)
        try:
            return real(*args, **kwargs)
        finally:
            around(-1)

    return dressed(untimed, real)


#: The file the wrappers' code names: who looks up the stack for the code that stat'ed a
#: file (``code_watch.caller``) goes past them, as past the standard library's.
FILENAME = "<frozen memotest untimed>"


def within_probe(frame, in_stdlib):
    """Whether code at ``frame`` runs inside one of these wrappers with only the standard
    library's code between (``in_stdlib`` of a code file's name, or a frozen module's:
    ``<frozen genericpath>``): what a ``stat`` made there shows of a file goes back to the
    probe, which hands its caller a yes or no. A ``Path`` subclass's own ``stat``, or a
    signal handler, between them is not."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name == FILENAME:
            return True
        if not (name.startswith("<frozen ") or in_stdlib(name)):
            return False
        frame = frame.f_back
    return False


def dressed(untimed, real):
    """``untimed`` named as ``real``, and marked."""
    untimed.__code__ = untimed.__code__.replace(co_filename=FILENAME)
    untimed.__name__ = real.__name__
    untimed.__qualname__ = getattr(real, "__qualname__", real.__name__)
    untimed.__doc__ = real.__doc__
    untimed.__module__ = getattr(real, "__module__", None)
    untimed.__wrapped__ = real
    setattr(untimed, MARK, True)
    return untimed


def _fspath(a):
    try:
        return os.fspath(a)
    except TypeError:
        return a  # the real function says what is wrong with it


def method_probe(real, scope, yes_no=None, plain=()):
    """A pathlib method ``real`` with its stats untimed (``self`` is a path: its
    ``stat`` runs inside, as pathlib's own); with ``yes_no``, a probe of what is at the
    path when ``self`` is of one of pathlib's own classes (``plain``): a subclass's
    ``stat``, ``__fspath__``... is the caller's code, and may keep what it sees."""

    def untimed(self, *args, **kwargs):
        around = scope
        if yes_no is not None and type(self) in plain and only_stdlib_inside():
            around = yes_no
        around(1)
        try:
            return real(self, *args, **kwargs)
        finally:
            around(-1)

    return dressed(untimed, real)


def makedirs_or_dir(real, scope):
    """``os.makedirs`` whose ``exist_ok=True`` calls say so to the shim."""

    def makedirs(name, mode=0o777, exist_ok=False):
        if not exist_ok:
            return real(name, mode, exist_ok)
        name = _fspath(name)  # __fspath__ is the caller's code
        scope(1)
        try:
            return real(name, mode, exist_ok)
        finally:
            scope(-1)

    return dressed(makedirs, real)


def mkdir_or_dir(real, scope):
    """``pathlib.Path.mkdir`` whose ``exist_ok=True`` calls say so to the shim."""

    def mkdir(self, mode=0o777, parents=False, exist_ok=False):
        if not exist_ok:
            return real(self, mode, parents, exist_ok)
        scope(1)
        try:
            return real(self, mode, parents, exist_ok)
        finally:
            scope(-1)

    return dressed(mkdir, real)


def install_or_dir():
    """Wraps ``os.makedirs`` and ``Path.mkdir`` (exist_ok calls only)."""
    scope = shim_scope("memotest_shim_or_dir")
    if scope is None:
        return
    import pathlib

    if not getattr(os.makedirs, MARK, False):
        os.makedirs = makedirs_or_dir(os.makedirs, scope)
    for cls in pathlib.Path.__mro__:
        real = cls.__dict__.get("mkdir")
        if callable(real) and not getattr(real, MARK, False):
            cls.mkdir = mkdir_or_dir(real, scope)  # type: ignore[method-assign]


def install():
    """Wraps the probes; returns whether they are (a shim with untimed probes is loaded)."""
    if INSTALLED:
        return True
    scope = shim_scope()
    if scope is None:
        return False
    import genericpath
    import pathlib
    import posixpath

    modules = (genericpath, posixpath, os.path)
    yes_no = shim_scope("memotest_shim_probe")
    plain = frozenset(
        c for c in (pathlib.Path, pathlib.PosixPath, getattr(pathlib, "WindowsPath", None)) if c
    )
    wrapped = {}
    for name in PATH_PROBES + PATH_PROBES_2:
        for module in modules:
            real = module.__dict__.get(name)
            if real is None or getattr(real, MARK, False):
                continue
            if id(real) not in wrapped:
                # samefile's answer is the two files' identity: untimed, not a probe
                told = yes_no if name in PATH_PROBES else None
                wrapped[id(real)] = probe(real, scope, told)
            setattr(module, name, wrapped[id(real)])
    for cls in pathlib.Path.__mro__:
        for name in PATHLIB_PROBES:
            real = cls.__dict__.get(name)
            if callable(real) and not getattr(real, MARK, False):
                told = yes_no if name not in PATH_PROBES_2 else None
                setattr(cls, name, method_probe(real, scope, told, plain))
    install_or_dir()
    INSTALLED.append(scope)
    return True
