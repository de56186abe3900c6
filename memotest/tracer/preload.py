"""Which modules a warm worker imports besides its own: learned from the runs it forked.

A run forked from a warm worker (``warm.py``) still imports, every time, whatever its
command needs beyond the worker's modules: for a pytest target, the plugins' and the
tests' libraries (``requests``, ``testtools``, ``asyncio``...). When a forked run ends,
it reports the modules it had imported from the interpreter's own folders (the standard
library and site-packages, never the project's folder) and the names pytest marked for
assertion rewriting (plugins, ``register_assert_rewrite``). The build keeps both, per
interpreter, in ``.memotest/warm.json`` in the runs' folder, and the next worker of that
interpreter there imports the modules (a *preload*) before it forks anything.

What a preload may change, and what keeps it honest:

* **Inputs.** What the worker read while preloading is part of every run's record, as
  the rest of its start-up is, and a change to it replaces the worker (``warm.py``). A
  preload adds inputs, never hides one: at worst a target re-runs when a library it did
  not import changes.
* **Assertion rewriting.** pytest cannot rewrite a module imported before it marked it.
  Names any run saw marked are never preloaded; a run that finds one of the worker's
  preloaded modules marked anyway (a conftest that just started to name it as a plugin)
  reports it, and the runner runs that target again as a fresh process.
* **Shadowing.** pytest puts each test file's folder first on ``sys.path``: a module
  of the project may have the name of a preloaded one (``tests/helpers.py`` and an
  installed ``helpers``). A run whose ``sys.path`` finds a preloaded package elsewhere
  at its end reports it, runs again as a fresh process, and the package is never
  preloaded again.
* **Import-time effects.** A module whose import warns (pytest would have shown or
  raised the warning), prints, starts a thread, or looks at a file of the project (under
  the runs' folder, outside the interpreter's own folders: ``hacking`` reads ``tox.ini``,
  which would make every run depend on it) is refused: the worker stops, the pool starts
  another without its whole top-level package, and that package is never preloaded
  again (``never``). The worker marks in its trace which import comes next, so that
  memotest can tell whose import read what.
* What is left is documented in ``docs/limits.md``: a module imported first by one test
  after changing the environment or the state of the process, and tests that check that
  a module is *not* imported, see the preloaded module instead. ``--no-preload`` keeps
  the workers to pytest; ``--no-warm`` runs every target fresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The hints file, in the store folder (``.memotest``) of the runs' folder.
HINTS = Path(".memotest") / "warm.json"
VERSION = 1
#: At most this many module names are kept per interpreter (the first ones learned).
MAX_MODULES = 5000
#: Never preloaded: importing them changes the process for everyone (terminal, GUI).
DENIED = frozenset({"readline", "rlcompleter", "antigravity", "this", "tkinter", "turtle"})


def marked(name: str, marks: set[str] | frozenset[str]) -> bool:
    """Whether pytest's rewrite hook would take ``name``: it or a package above it is
    marked (``AssertionRewritingHook._is_marked_for_rewrite``)."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in marks for i in range(1, len(parts) + 1))


#: What a run reports when it ran Hypothesis's engine (``warm.py``): its Python files
#: stay whole (``codemap.py``), so its next runs do not note the code they execute.
RAN_HYPOTHESIS = "it ran Hypothesis"


@dataclass
class _Hints:
    modules: dict[str, None] = field(default_factory=dict)  # ordered: import order
    never: set[str] = field(default_factory=set)
    #: The arguments (JSON) of runs that ran Hypothesis: not worth noting their code.
    whole: set[str] = field(default_factory=set)
    changed: bool = False


class PreloadBook:
    """The preload hints of every folder a build's workers run in, read on first use and
    written back (merged with what another build wrote meanwhile) by :meth:`save`."""

    def __init__(self) -> None:
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
            hints.whole = {str(a) for a in entry.get("whole", [])}
            self._hints[key] = hints
        return hints

    def modules_for(self, cwd: str, python: str, own: tuple[str, ...]) -> tuple[str, ...]:
        """What a worker of ``python`` in ``cwd`` (which imports ``own``) preloads: the
        learned modules but those refused or marked, and but the project's own (a module
        whose top-level name is a file or folder of ``cwd`` or ``cwd/src``: an installed
        copy of the project would otherwise make every target depend on all of it)."""
        with self._lock:
            hints = self._get(cwd, python)
            names = list(hints.modules)
            never = frozenset(hints.never)
        project: dict[str, bool] = {}
        out = []
        for name in names:
            top = name.split(".", 1)[0]
            if top in DENIED or name in own or marked(name, never):
                continue
            if top not in project:
                project[top] = _in_project(cwd, top)
            if not project[top]:
                out.append(name)
        return tuple(out)

    def learn(self, cwd: str, python: str, report: dict[str, Any]) -> None:
        """Takes a forked run's report: ``modules`` it imported, ``marked`` names, and the
        preloaded packages its ``sys.path`` would have found elsewhere (``shadowed``):
        neither of the last two is preloaded again."""
        modules = [m for m in report.get("modules", []) if isinstance(m, str)]
        marks = {m for m in report.get("marked", []) if isinstance(m, str)}
        marks |= {m for m in report.get("shadowed", []) if isinstance(m, str)}
        args = report.get("args")
        with self._lock:
            hints = self._get(cwd, python)
            if report.get("code") == RAN_HYPOTHESIS and isinstance(args, list):
                hints.whole.add(json.dumps(args))
                hints.changed = True
            if not marks <= hints.never:
                hints.never |= marks
                hints.changed = True
            for name in modules:
                if name not in hints.modules and len(hints.modules) < MAX_MODULES:
                    hints.modules[name] = None
                    hints.changed = True

    def whole_for(self, cwd: str, python: str) -> frozenset[str]:
        """The arguments (JSON) of the runs of ``python`` in ``cwd`` that ran Hypothesis:
        their files stay whole anyway, so noting their code would only slow them."""
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
            whole = sorted({*map(str, entry.get("whole", [])), *hints.whole})
            data[python] = {"modules": list(modules), "never": never, "whole": whole}
            _write(path, data)


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
