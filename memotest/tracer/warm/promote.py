"""A worker whose runs all ended, made the worker of runs its plugin prepares.

A build that collects its tests first (``memotest build --pytest``) forks the collection
from a warm worker that imported the test runner, and the targets from a worker that
also prepared their runs (a configured pytest session: ``Target.prepare``). Once the
collection ended and no target of the first worker is left, that worker is asked to
prepare (``memotest/worker/serve.py``): it preloads what a new worker for the targets
would, has the plugin prepare the runs, and says it is ready again, without starting
Python and importing the test runner once more.

Its trace is one log from its start: the events up to its first ready answer, then those
its runs wrote before they retargeted their own trace (a forked child logs here until
it does: they are the runs', dropped), then :data:`PROMOTE_MARK`, looked up by the worker
when it takes the request (its runs have all ended then), and the preparation. Its next
runs' records hold its start-up and the preparation, as those of a worker started for
them would: the preload and the preparation come after its first ready answer, as they
come after the start-up's imports in a new worker, and its reads before the noting mark
stay whole (``vouched.py``).
"""

from __future__ import annotations

import json
import queue
import time
from typing import TYPE_CHECKING

from memotest.tracer.log import Event
from memotest.tracer.log import read as read_log
from memotest.tracer.procwatch import ProcessWatcher

if TYPE_CHECKING:
    from memotest.tracer.warm.spec import WarmSpec
    from memotest.tracer.warm.worker import Worker

#: ``memotest/worker/serve.py``'s ``PROMOTE_MARK``.
PROMOTE_MARK = "/.memotest-promote"


def promoted_events(events: list[Event], first: int, pid: int) -> list[Event]:
    """The worker's trace (``events``, of which the ``first`` were there at its first ready
    answer) without what its runs wrote in it: between that answer and the mark, only the
    worker's (``pid``) own events are kept. Without the mark, the first ones only."""
    mark = next(
        (
            i
            for i in range(first, len(events))
            if events[i].op == "M" and events[i].pid == pid and events[i].path == PROMOTE_MARK
        ),
        None,
    )
    if mark is None:
        return events[:first]
    runs = (e for e in events[first:mark] if e.pid == pid)
    return [*events[:first], *runs, *events[mark + 1 :]]


def promote(
    worker: Worker,
    spec: WarmSpec,
    preload: tuple[str, ...],
    prepared_preload: tuple[str, ...],
    whole: frozenset[str],
    timeout: float,
) -> bool:
    """Makes ``worker``, whose runs all ended, the worker of ``spec`` (its own but for
    ``spec.prepare``): it preloads ``preload``, has the plugin prepare the runs and
    imports ``prepared_preload``, as a worker started for ``spec`` would after its own
    start-up. False if it cannot be used (``worker.why``; ``worker.refused``)."""
    proc = worker.run.proc
    if proc is None or proc.stdin is None or not worker.hold():
        return False
    changed = worker.changed()
    if changed is not None:
        worker.why = f"{changed} changed"
        return False
    started_ns = time.time_ns()
    worker.spec = spec
    worker.preload = (*worker.preload, *preload)
    worker.prepared_preload = prepared_preload
    worker.whole = whole
    watcher = ProcessWatcher(worker.run.pid, worker.run.lib, worker.run.dir).start()
    request = {
        "promote": {
            "prepare": list(spec.prepare),
            "preload": list(preload),
            "preload_prepared": list(prepared_preload),
        }
    }
    try:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        msg = worker.promoted.get(timeout=timeout)
    except (OSError, ValueError, queue.Empty):
        msg = None
    watcher.stop()
    worker.seen = [*worker.seen, *watcher.seen.values()]
    events, damage = read_log(worker.run.log_path)
    events = promoted_events(events, worker.logged, worker.run.pid)
    return worker.take_ready(msg, started_ns, (events, damage)) and worker.release()
