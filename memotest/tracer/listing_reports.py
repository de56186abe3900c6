"""What the plain processes of a traced command report of their listings, and whom to trust.

A warm worker's run reports the folders that only looking readers listed
(``memotest/worker/listings.py``). A plain pytest process a tox env or a nox session runs
(``memotest_walk``, ``plugins/memotest_pytest/walk_path/``) installs the same watch, and
reports through a folder of the run's trace folder, named in its environment:

* :func:`prepare` makes ``TRACE_DIR/listings/`` with ``watch.json`` (the text of the
  worker's ``boot.py`` and of the modules the watch needs, as a warm worker gets them:
  read by memotest, so none of them is an input of the run; and the worker-side modules
  of plugins, for their ``listing``), and gives ``MEMOTEST_LISTINGS`` for the command's
  environment. It is not part of the key (the trace folder is new each run).
* the process takes the variable out of its environment (the processes it starts do not
  report through it) and, at exit, writes ``PID.json``: ``{"pid": PID, "listings": ...}``
  (None when some listing could not be attributed), by a rename, so a report is whole or
  missing.
* :func:`read` takes the reports; ``tracer/collect.py`` keeps those of processes whose pid
  is one process image in the whole trace (announced once, not forked again after it, and
  listing nothing before its image started): a pid reused, or an image that another
  program executed into after listing, cannot be told apart.

A folder may then be held by the entries looked for (``inputs/entries.py``) only if every
process that listed it reported it as a looking-only listing (:func:`combined`); a
process that lists it and reports nothing (a program like ``ls``, a child that died, a
forked child, which reports blind) keeps it whole.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The variable naming the folder reports go to (``memotest_walk`` reads it).
VARIABLE = "MEMOTEST_LISTINGS"
FOLDER = "listings"
WATCH = "watch.json"
#: The worker's modules the watch needs, each after those it imports.
MODULES = ("audit", "extensions", "interpreter", "listings", "untimed")

Listings = dict[str, list[list[str]]]


@functools.cache
def _watch() -> bytes:
    from memotest.tracer.warm.command import HERE, _source, extension_modules

    modules: list[str] = []
    for name in MODULES:
        path = str(HERE / f"{name}.py")
        modules += [name, path, _source(path)]
    extensions = []
    for module in extension_modules():
        path = str(module.__file__)
        modules += [module.__name__, path, _source(path)]
        extensions.append(module.__name__)
    boot = str(HERE / "boot.py")
    payload = {"boot": [boot, _source(boot)], "modules": modules, "extensions": extensions}
    return json.dumps(payload).encode()


def prepare(trace_dir: str) -> dict[str, str]:
    """Makes the report folder of a run in ``trace_dir``; the variables that name it.
    Nothing (and so no report) when it cannot be made."""
    folder = os.path.join(trace_dir, FOLDER)
    try:
        os.mkdir(folder)
        Path(folder, WATCH).write_bytes(_watch())
    except Exception:
        return {}
    return {VARIABLE: folder}


def read(trace_dir: str) -> dict[int, Listings | None]:
    """The reports written in ``trace_dir``'s report folder, by pid (None: unreadable, or
    the process could not attribute some listing)."""
    folder = os.path.join(trace_dir, FOLDER)
    out: dict[int, Listings | None] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        stem, _, ext = name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        pid = int(stem)
        try:
            data = json.loads(Path(folder, name).read_bytes())
        except (OSError, ValueError):
            out[pid] = None
            continue
        out[pid] = _valid(data, pid)
    return out


def _valid(data: Any, pid: int) -> Listings | None:
    if not isinstance(data, dict) or data.get("pid") != pid:
        return None
    listings = data.get("listings")
    if not isinstance(listings, dict):
        return None
    for looked in listings.values():
        if not (isinstance(looked, list) and len(looked) == 2):
            return None
        for part in looked:
            if not (isinstance(part, list) and all(isinstance(n, str) for n in part)):
                return None
    return listings


def combined(listers: Mapping[str, set[int]], reports: Mapping[int, Listings | None]) -> Listings:
    """The folders every process that listed them reported as looking-only listings, with
    what they all looked for (the union)."""
    out: Listings = {}
    for path, pids in listers.items():
        names: set[str] = set()
        patterns: set[str] = set()
        for pid in pids:
            rep = reports.get(pid)
            looked = rep.get(path) if rep is not None else None
            if looked is None:
                break
            names.update(looked[0])
            patterns.update(looked[1])
        else:
            out[path] = [sorted(names), sorted(patterns)]
    return out
