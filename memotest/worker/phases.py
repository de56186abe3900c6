"""The run's report of the code each labelled part of it executed (``phase_report``).

Each phase holds every code object the run evaluated while it was current (``PHASES``,
``code_watch.phase``): a test's is mostly pytest's, pluggy's and the standard library's,
about a thousand code objects, of which a few dozen are the project's. Which are is
decided once per file name (:func:`code_watch.project_file`), and the phases are
filtered by file name in C (``itertools.compress`` over ``map``): a file of 150 tests
took 170 ms when each code object of each phase went through a Python function. The
report names each code object once and each phase once; a test's part, its phase's code
and its fixtures', is made by memotest (``memotest/recording/parts.py``), once per phase.
"""

import os
from itertools import compress
from operator import attrgetter

from .code_watch import OPENERS, PEEKED, PHASES, USES, WORKERS, project_file
from .codes import qualname

_FILENAME = attrgetter("co_filename")


def phase_report(where):
    """The code of the project's ``.py`` files (:func:`code_watch.project_file`; ``where``:
    the interpreter's folders) each labelled phase of the run executed, compact: ``{"codes":
    [[path, qualified name, first line], ...], "global": [i, ...], "peeked": [...], "phases":
    {label: [...]}, "uses": {label: [label, ...]}, "openers": {path: [file, ...]}}``, each
    code object listed once in ``codes`` and named by its index elsewhere; None if the run
    labelled none. ``uses``: the labelled parts in the order they were first labelled, each
    with the phases whose code counts as its own too (:func:`code_watch.uses`: a test's
    fixtures); ``phases``: the code each of those phases executed (and whose ``__code__``
    was read there); ``global``: what ran outside every part; ``peeked``: the code whose
    ``__code__`` was read there (pytest reading a test's signature at collection).
    ``openers``: what opened (the first caller outside the standard library) or stat'ed
    (``os.stat:`` and it) such a file other than the import system (its code is then not
    all the run depended on). memotest makes each part's code of them
    (``memotest/recording/parts.py``); whether the code of a file can stand for it is its to decide
    (``memotest_pytest/selection.py``)."""
    if not USES:
        return None
    files = {}  # co_filename -> its path, or None: not the project's
    ours = set()  # the co_filenames that are the project's
    index = {}  # id(code) -> its index in codes
    codes = []

    def project(group):
        for name in set(map(_FILENAME, group)).difference(files):
            path = os.path.normpath(name)
            mine = project_file(name, where) and path not in WORKERS
            files[name] = path if mine else None
            if mine:
                ours.add(name)
        out = []
        for code in compress(group, map(ours.__contains__, map(_FILENAME, group))):
            # The code objects are alive (PHASES, PEEKED hold them): their ids are theirs.
            at = index.get(id(code))
            if at is None:
                at = index[id(code)] = len(codes)
                codes.append([files[code.co_filename], qualname(code), code.co_firstlineno])
            out.append(at)
        return sorted(set(out))

    phases = {}
    for label, others in USES.items():
        for each in (label, *others):
            if each not in phases:
                phases[each] = project([*PHASES.get(each, ()), *PEEKED.get(each, ())])
    report = {
        "global": project(PHASES.get("", ())),
        "peeked": project(PEEKED.get("", ())),
        "phases": phases,
        "uses": {label: sorted(others) for label, others in USES.items()},
    }
    paths = {path for path, _name, _line in codes}
    report["codes"] = codes
    report["openers"] = {p: sorted(OPENERS[p]) for p in paths if p in OPENERS}
    return report
