"""The worker's reads that its own watchers vouch for.

A worker that prepares its runs (``memotest/worker/prepared_code.py``: pytest configured,
its root conftests imported) notes the code it executes meanwhile, with the watchers of a
run installed first (what opened or stat'ed a ``.py`` file other than the import system;
since its start, who opened the files readers read for a part, ``worker/sections.py``),
and every run forked afterwards inherits them and reports on the worker's reads as on its
own. So a file the worker read after it said the watchers were on (a lookup of
:data:`NOTING_MARK`) is, for the runs' records, as if the run had read it: not read
*elsewhere* (``Trace.read_elsewhere``), so a ``.py`` file can be held by the code that ran
(``inputs/code.py``), a ``pyproject.toml`` pytest's configuration read by its table
(``inputs/section.py``). A file the worker read before, or another process read, stays as
it was: read elsewhere, whole.
"""

from __future__ import annotations

from memotest.tracer.fold import resolve_dotdot
from memotest.tracer.log import Event

#: ``memotest/worker/prepared_code.py``'s ``MARK``: looked up once the watchers are on.
NOTING_MARK = "/.memotest-noting"


def vouched_reads(events: list[Event], worker_pid: int) -> tuple[list[Event], frozenset[str]]:
    """``events`` (the worker's start-up) without the mark, and the files only the worker's
    process observed, and only after the mark (none when there is no mark)."""
    kept: list[Event] = []
    after: set[str] = set()
    before: set[str] = set()  # observed by the worker before the mark, or by another process
    watched = False
    for ev in events:
        if ev.op == "M" and ev.fields and ev.path == NOTING_MARK and ev.pid == worker_pid:
            watched = True
            continue
        kept.append(ev)
        if ev.op not in "RSTYp" or not ev.fields:
            continue
        path = resolve_dotdot(ev.path)
        (after if watched and ev.pid == worker_pid else before).add(path)
    return kept, frozenset(after - before)
