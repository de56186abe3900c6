"""The code a worker's preparation executed, noted in the worker and counted in every run.

A plugin that prepares its runs in the worker (``extensions.py``'s ``prepare``: pytest
configured, its root conftests imported) runs the project's code there: a conftest's
``import mypackage`` runs ``mypackage``'s body in the worker, once, and no run imports it
again. The worker notes the code it executes while it prepares (:func:`start`,
:func:`stop`), as a run notes its own (``code_watch.py``), with the same watchers of what
else reads the project's files (installed before, so inherited by every run); each child
forked afterwards counts that code as run in the part outside every test
(:func:`forked`), and notes the code it executes itself from scratch: the extension's
table and ``sys.monitoring``'s disabled events are the worker's until its noting stops.
A module imported then is held in each run's record by that code and the run's own
(``code_watch.code_report``), no longer whole. In the trace, a lookup of :data:`MARK`
tells memotest where the watchers started: what the worker read after it, they vouch for
(``memotest/tracer/warm/worker.py``).
"""

import os
import sys

from . import code_watch

#: Looked up (and not found) once the watchers are on, before the preparation.
MARK = "/.memotest-noting"
#: The modules imported while the worker noted its code (their code that ran is in
#: ``code_watch.PREPARED_CODES``); whether the preparation forked a process.
STATE = {"before": None, "forked": False}


def start(executed):
    """Starts noting the code the worker executes (``executed``: what notes it, or None:
    the runs note no code). Returns whether it does."""
    if executed is None:
        return False
    try:
        code_watch.watch_code()
        executed.start()
    except Exception:
        return False
    STATE["before"] = frozenset(sys.modules)
    os.path.exists(MARK)
    return True


def stop(executed, where):
    """Stops noting; keeps the code of the project's files (``where``: the interpreter's
    folders) that ran, for every run. The preparation's modules stay whole when the
    noting was displaced meanwhile."""
    codes, intact = executed.stop()
    STATE["forked"] = bool(code_watch.FORKED)
    before = STATE["before"]
    if not intact or before is None:
        return
    code_watch.PREPARED_CODES.extend(
        c for c in codes if code_watch.project_file(c.co_filename, where)
    )
    code_watch.PREPARED.update(set(sys.modules) - before)
    code_watch.quiet_prepared(where)


def forked():
    """In a child just forked: what the worker forked to make it is not the run's
    (``code_watch.FORKED`` holds the worker's forks), and the code the preparation ran
    is the start of the run's part outside every test."""
    code_watch.FORKED[:] = [True] if STATE["forked"] else []
    if code_watch.PREPARED_CODES:
        code_watch.PHASES.setdefault("", []).extend(code_watch.PREPARED_CODES)
