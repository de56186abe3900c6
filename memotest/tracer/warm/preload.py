"""Which modules a warm worker imports besides its own: learned from the runs it forked.

A run forked from a warm worker (``tracer/warm/``) still imports, every time, whatever its
command needs beyond the worker's modules: a test runner's plugins, the tests' libraries
(``requests``, ``testtools``, ``asyncio``...). When a forked run ends, it reports the
modules it had imported from the interpreter's own folders (the standard library and
site-packages, never the project's folder), and plugins read in its report the modules
it must import itself (``memotest_warm_report``: a test runner that rewrites the modules
it imports, say). The build keeps both, per interpreter, in ``.memotest/warm.json`` in the
runs' folder, and the next worker of that interpreter there imports the modules (a
*preload*) before it forks anything.

What a preload may change, and what keeps it honest:

* **Inputs.** What the worker read while preloading is part of every run's record, as
  the rest of its start-up is, and a change to it replaces the worker (``worker.py``). A
  preload adds inputs, never hides one: at worst a target re-runs when a library it did
  not import changes.
* **Modules a run must import itself.** Names any run's report asked to import fresh
  (``WarmReading.fresh``: what pytest marks for rewriting) are never preloaded before
  the runs' plugin hooks are in place; a run that finds one of the worker's preloaded
  modules among them anyway reports it, and the runner runs that target again as a fresh
  process. A worker whose plugin *prepares* its runs (a configured pytest session:
  ``memotest_pytest/worker_side.py``) imports them after the preparation, under the hooks
  it installed (``prepared_for``): rewritten as each run would rewrite them, so the runs
  stop importing Hypothesis (74 modules) each again. One of them that the preparation
  had not marked, and that a run marks, taints that run as above.
* **Shadowing.** A run may put its own folders first on ``sys.path``: a module of the
  project may have the name of a preloaded one (``tests/helpers.py`` and an installed
  ``helpers``). A run whose ``sys.path`` finds a preloaded package elsewhere at its end
  reports it, runs again as a fresh process, and the package is never preloaded again.
* **Import-time effects.** A module whose import warns (the run would have shown or
  raised the warning), prints, starts a thread, or looks at a file of the project (under
  the runs' folder, outside the interpreter's own folders: ``hacking`` reads ``tox.ini``,
  which would make every run depend on it) is refused: the worker stops, the pool starts
  another without its whole top-level package, and that package is never preloaded
  again (``never``). The worker marks in its trace which import comes next, so that
  memotest can tell whose import read what.
* What is left is documented in ``docs/limits.md``: a module imported first by one test
  after changing the environment or the state of the process, and tests that check that
  a module is *not* imported, see the preloaded module instead. ``--no-preload`` keeps
  the workers to their own modules; ``--no-warm`` runs every target fresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memotest.tracer.log import Event
from memotest.tracer.warm.reading import marked, read_report

#: The hints file, in the store folder (``.memotest``) of the runs' folder.
HINTS = Path(".memotest") / "warm.json"
VERSION = 1
#: At most this many module names are kept per interpreter (the first ones learned).
MAX_MODULES = 5000
#: Never preloaded: importing them changes the process for everyone (terminal, GUI).
DENIED = frozenset({"readline", "rlcompleter", "antigravity", "this", "tkinter", "turtle"})


@dataclass
class _Hints:
    modules: dict[str, None] = field(default_factory=dict)  # ordered: import order
    #: Refused or shadowed (``refuse``, ``learn``): never preloaded, by any worker.
    never: set[str] = field(default_factory=set)
    #: What runs must import under their plugins' own hooks (``WarmReading.fresh``: what
    #: pytest marked for rewriting): never preloaded before a plugin prepares the runs,
    #: only after it (``prepared_for``).
    fresh: set[str] = field(default_factory=set)
    #: The arguments (JSON) of runs whose files stay whole: not worth noting their code.
    whole: set[str] = field(default_factory=set)
    changed: bool = False


class PreloadBook:
    """The preload hints of every folder a build's workers run in, read on first use and
    written back (merged with what another build wrote meanwhile) by :meth:`save`."""

    def __init__(self, config: Any = None) -> None:
        #: The command line's ``memotest.load.plugins.Config``, for the hooks (None: none).
        self.config = config
        self._lock = threading.Lock()
        self._hints: dict[tuple[str, str], _Hints] = {}

    def _get(self, cwd: str, python: str) -> _Hints:
        key = (cwd, python)
        hints = self._hints.get(key)
        if hints is None:
            hints = _Hints()
            entry = _read(Path(cwd) / HINTS).get(python) or {}
            hints.modules = dict.fromkeys(str(m) for m in entry.get("modules", []))
            hints.never = {str(m) for m in entry.get("never", [])}
            hints.fresh = {str(m) for m in entry.get("fresh", [])}
            hints.whole = {str(a) for a in entry.get("whole", [])}
            self._hints[key] = hints
        return hints

    def modules_for(self, cwd: str, python: str, own: tuple[str, ...]) -> tuple[str, ...]:
        """What a worker of ``python`` in ``cwd`` (which imports ``own``) preloads: the
        learned modules but those refused or to be imported fresh, and but the project's
        own (a module whose top-level name is a file or folder of ``cwd`` or ``cwd/src``:
        an installed copy of the project would otherwise make every target depend on all
        of it)."""
        return self._select(cwd, python, own, prepared=False)

    def prepared_for(self, cwd: str, python: str, own: tuple[str, ...]) -> tuple[str, ...]:
        """What a worker whose plugin prepares its runs (``Target.prepare``) imports after
        the preparation, under the hooks it installed (pytest's assertion rewriting): the
        learned modules that runs had to import under those hooks (``fresh``), but the
        refused, the shadowed and the project's own, as :meth:`modules_for`."""
        return self._select(cwd, python, own, prepared=True)

    def _select(
        self, cwd: str, python: str, own: tuple[str, ...], prepared: bool
    ) -> tuple[str, ...]:
        with self._lock:
            hints = self._get(cwd, python)
            names = list(hints.modules)
            never = frozenset(hints.never)
            fresh = frozenset(hints.fresh)
        project: dict[str, bool] = {}
        out = []
        for name in names:
            top = name.split(".", 1)[0]
            if top in DENIED or name in own or marked(name, never):
                continue
            if marked(name, fresh) != prepared:
                continue
            if top not in project:
                project[top] = _in_project(cwd, top)
            if not project[top]:
                out.append(name)
        return tuple(out)

    def learn(self, cwd: str, python: str, report: dict[str, Any]) -> None:
        """Takes a forked run's report: the ``modules`` it imported, the preloaded packages
        its ``sys.path`` would have found elsewhere (``shadowed``) and what the plugins read
        in it (``reading.py``): neither the shadowed nor the modules it must import fresh
        are preloaded again."""
        reading = read_report(report, self.config)
        modules = [m for m in report.get("modules", []) if isinstance(m, str)]
        fresh = set(reading.fresh)
        # What an import hook's loader made counts only if a plugin says the runs must
        # import it under its hooks (``prepared_for``): never a plain preload's.
        hooked = [m for m in report.get("hooked", []) if isinstance(m, str)]
        marks = {m for m in report.get("shadowed", []) if isinstance(m, str)}
        args = report.get("args")
        with self._lock:
            hints = self._get(cwd, python)
            if reading.whole and isinstance(args, list):
                hints.whole.add(json.dumps(args))
                hints.changed = True
            if not marks <= hints.never:
                hints.never |= marks
                hints.changed = True
            if not fresh <= hints.fresh:
                hints.fresh |= fresh
                hints.changed = True
            modules += [m for m in hooked if marked(m, hints.fresh)]
            for name in modules:
                if name not in hints.modules and len(hints.modules) < MAX_MODULES:
                    hints.modules[name] = None
                    hints.changed = True

    def whole_for(self, cwd: str, python: str) -> frozenset[str]:
        """The arguments (JSON) of the runs of ``python`` in ``cwd`` whose files stay whole
        (``WarmReading.whole``): noting their code would only slow them."""
        with self._lock:
            return frozenset(self._get(cwd, python).whole)

    def refuse(self, cwd: str, python: str, names: list[str]) -> None:
        """Never preloads ``names`` again, nor anything of their top-level packages: their
        import warned, printed, started a thread or looked at the project's files, and
        importing ``pkg.sub`` runs ``pkg/__init__.py`` first, which may be the culprit
        (eventlet warns that it is deprecated)."""
        with self._lock:
            hints = self._get(cwd, python)
            hints.never.update(name.split(".", 1)[0] for name in names)
            hints.changed = True

    def save(self) -> None:
        """Writes what was learned to each folder's hints file that has a store folder."""
        with self._lock:
            pending = [(k, h) for k, h in self._hints.items() if h.changed]
            for _, h in pending:
                h.changed = False
        for (cwd, python), hints in pending:
            path = Path(cwd) / HINTS
            if not path.parent.is_dir():
                continue  # no store there (yet): nothing is written outside one
            data = _read(path)
            entry = data.get(python) or {}
            modules = dict.fromkeys(str(m) for m in entry.get("modules", []))
            for name in hints.modules:
                if len(modules) >= MAX_MODULES:
                    break
                modules.setdefault(name, None)
            never = sorted({*map(str, entry.get("never", [])), *hints.never})
            fresh = sorted({*map(str, entry.get("fresh", [])), *hints.fresh})
            whole = sorted({*map(str, entry.get("whole", [])), *hints.whole})
            data[python] = {"modules": list(modules), "never": never, "fresh": fresh}
            data[python]["whole"] = whole
            _write(path, data)


#: The folder of the preload's markers (looked up, never there): see :func:`project_reads`.
PRELOAD_MARK = "/.memotest-preload/"


def project_reads(
    events: list[Event], cwd: str, roots: list[str]
) -> tuple[list[Event], list[tuple[str, str]]]:
    """The worker's events without the preload's markers, and the preloaded modules whose
    import looked at the project's files (anything under ``cwd`` but ``cwd`` itself and
    the interpreter's own folders, ``roots``): preloaded, such a module would make every
    run depend on that file (``hacking`` reads ``tox.ini`` when imported). The shim logs
    a path once, so only the first module to look at a file is named."""
    kept: list[Event] = []
    refused: dict[str, str] = {}
    current = ""
    inside = cwd.rstrip("/") + "/"
    for ev in events:
        path = ev.fields[0] if ev.fields else ""
        if ev.op == "M" and (path + "/").startswith(PRELOAD_MARK):
            # ``PRELOAD_MARK + name`` starts a module's import; ``PRELOAD_MARK + "-N"``
            # (no module's name) ends the preload: what follows (a plugin preparing its
            # runs, ``worker/extensions.py``) is no preloaded module's.
            current = path[len(PRELOAD_MARK) :]
            if current.startswith("-"):
                current = ""
            continue
        kept.append(ev)
        if (
            current
            and current not in refused
            and ev.op in "RSTpMLWNDU"
            and path.startswith(inside)
            and not (path + "/").startswith(tuple(roots))
        ):
            refused[current] = f"its import looked at {path}"
    return kept, list(refused.items())


def _in_project(cwd: str, top: str) -> bool:
    return any(
        os.path.exists(os.path.join(cwd, folder, top + suffix))
        for folder in ("", "src")
        for suffix in ("", ".py")
    )


def _read(path: Path) -> dict[str, Any]:
    """The hints file's interpreters; empty if it is missing, unreadable or of another
    version (hints are only hints: the worst a lost one costs is a slower run)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    found = data.get("interpreters")
    return found if isinstance(found, dict) else {}


def _write(path: Path, interpreters: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps({"version": VERSION, "interpreters": interpreters}))
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        tmp.unlink()
