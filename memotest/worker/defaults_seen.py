"""Which default values of a module's functions a run saw (run side).

The values of a ``def`` statement's defaults are constants of the module's body
(``codes.default_sites``). A run sees them by running the function (a call binds them),
or by reading them without running it: ``__defaults__`` and ``__kwdefaults__``
(``inspect.signature``, ``help``, pytest's look at a fixture, a decorator), which raise an
audit event with the function; the module body's code object (a frame's ``f_code``,
audited too); or the garbage collector handing out what a function refers to
(``gc.get_referents``). :func:`unseen` gives, for each module body that ran, the
instructions that load values none of these saw: the record keeps them
(``code_watch.quiet_classes``), and the digests take those values by their shape only
(``codes.digest``). ``tests/test_codelevel_defaults.py`` is the red team.

Out of reach, as for ``__code__``: C code reading a function's defaults or a frame's
code through the C API (``PyFunction_GetDefaults``, ``PyFrame_GetCode``) without
calling the function.

Standard library only, Python 3.10 syntax: it runs in the worker
(``memotest/worker/__init__.py``).
"""

from itertools import compress
from operator import attrgetter

from .codes import default_sites

_NAME = attrgetter("co_name")

#: The code objects of the functions whose ``__defaults__`` or ``__kwdefaults__`` were read.
DEFAULTS_READ = []
#: The module bodies whose frame's ``f_code`` was read (all their constants).
FRAMES_READ = []
#: Whether the garbage collector handed out objects, or a read could not be told apart.
GC_READ = []
#: id(module code) -> (the code, its ``default_sites``): found once in a worker for the
#: module bodies its preparation ran (:func:`remember_sites`), the same in every run.
SITES = {}


def remember_sites(code):
    """Finds the ``default_sites`` of the module body ``code`` now, once for every run."""
    SITES[id(code)] = (code, default_sites(code))


def sites_of(code):
    """``codes.default_sites(code)``, found once for a module body :func:`remember_sites` had."""
    known = SITES.get(id(code))
    return known[1] if known is not None and known[0] is code else default_sites(code)


def read(name, obj):
    """An audited read of ``obj.name`` (``__defaults__``, ``__kwdefaults__``, ``f_code``);
    the caller keeps its own reads of ``__code__`` and ``f_code`` from being noted."""
    if name == "f_code":
        code = obj.f_code
        if code.co_name == "<module>":
            FRAMES_READ.append(code)
    else:
        DEFAULTS_READ.append(obj.__code__)


def unseen(codes, namespaces):
    """``{module code: [offset, ...]}``: for each module body among ``codes`` (the code
    objects the run executed, and those whose ``__code__`` it read) of a file imported as
    one module (``namespaces``: origin -> its namespace, None when two), the offsets of the
    instructions loading default values of a function that did not run and whose
    defaults nothing read. None in a run that had the garbage collector hand out objects;
    none for a body whose frame's code was read, or a file whose body ran twice (a
    reload: the first one's functions may have been read)."""
    if GC_READ:
        return {}
    ran = set(map(id, codes))
    read = set(map(id, DEFAULTS_READ))
    framed = set(map(id, FRAMES_READ))
    bodies = {}
    # The module bodies, picked in C: a run executes thousands of code objects.
    for code in compress(codes, map("<module>".__eq__, map(_NAME, codes))):
        bodies.setdefault(code.co_filename, {})[id(code)] = code
    out = {}
    for path, found in bodies.items():
        if len(found) != 1 or not isinstance(namespaces.get(path), dict):
            continue
        (code,) = found.values()
        if id(code) in framed:
            continue
        offsets = [
            offset
            for function, shapes in sites_of(code)
            if id(function) not in ran and id(function) not in read
            for offset in shapes
        ]
        if offsets:
            out[code] = offsets
    return out
