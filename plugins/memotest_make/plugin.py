"""memotest plugin: a Makefile's targets as memotest targets.

``memotest build -f Makefile test lint`` (or ``--from make``, or just ``memotest build``
in a folder with a ``GNUmakefile``/``makefile``/``Makefile`` and no ``memotest.toml``)
runs each named make target as the memotest target ``make:<name>``, whose command is
``make -f <Makefile> <name>`` in the Makefile's folder: traced, recorded, and replayed
while nothing make and the recipes observed changed.

The targets are the Makefile's explicit targets as make itself reports them
(:mod:`memotest_make.database`). A prerequisite that is itself such a target becomes a
``needs`` edge, so that two make processes never build the same prerequisite at once, and
the target's make takes it as done (``--assume-old``): its recipe runs once per build, as
its own target, not again inside each target that depends on it.
On the command line a target may be named ``test`` or ``make:test``. With no names, the
targets in the Makefile's ``MEMOTEST_TARGETS`` variable are built, else make's default
goal (what a bare ``make`` builds), never every target (``clean`` is a target too).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import TYPE_CHECKING

from memotest.errors import ConfigError
from memotest.hookspecs import hookimpl
from memotest.load.config import Project, Settings, find_cycle
from memotest.load.plugins import LoadRequest
from memotest.model import SourceLocation, Target

if TYPE_CHECKING:
    from memotest_make import database

# Every memotest command loads this plugin: make's database (subprocess, its regexes) is
# imported when a Makefile is loaded.

SOURCE = "make"
PREFIX = "make:"
#: The names make looks for, in make's order.
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def is_makefile(path: Path) -> bool:
    name = path.name
    return name in MAKEFILES or name.endswith(".mk") or name.lower().startswith("makefile")


def find_makefile(folder: Path) -> Path | None:
    for name in MAKEFILES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


@hookimpl
def memotest_load_targets(request: LoadRequest) -> Project | None:
    if request.source not in (None, SOURCE):
        return None
    if request.path is not None:
        if request.source is None and not is_makefile(request.path):
            return None
        path = request.path if request.path.is_absolute() else request.cwd / request.path
    else:
        found = find_makefile(request.cwd)
        if found is None:
            if request.source == SOURCE:
                raise ConfigError(
                    f"{request.cwd}: make: no GNUmakefile, makefile or Makefile here "
                    "(name one with -f FILE)"
                )
            return None
        path = found
    project, defaults = load(path)
    project.default = defaults
    project.resolve = lambda name: resolve(project, name)
    return project


def load(path: Path) -> tuple[Project, list[str]]:
    """The Makefile's explicit targets as ``make:<name>`` targets, and the names a build
    without names builds (:func:`default_names`)."""
    from memotest_make import database

    path = path.absolute()
    db = database.read(path)
    folder = str(path.parent)
    rule_lines = _rule_lines(path)
    targets: dict[str, Target] = {}
    for mt in sorted(db.targets.values(), key=lambda mt: _order(mt, rule_lines)):
        name = mt.name
        needs = tuple(
            dict.fromkeys(PREFIX + p for p in mt.prerequisites if p in db.targets and p != name)
        )
        # The prerequisites that are targets of their own run before it (``needs``): its
        # make takes them as done (``-o``), so that their recipes run once, not again here.
        done = [f"--assume-old={n.removeprefix(PREFIX)}" for n in needs]
        targets[PREFIX + name] = Target(
            name=PREFIX + name,
            command=("make", "-f", str(path), *done, name),
            cwd=folder,
            needs=needs,
            # One make at a time: the targets of one Makefile share its folders (make lists
            # them, the recipes write there), so side by side they are a hazard the first
            # build would find only after running them, and run again alone. Each make may
            # still run its own recipes in parallel (make's -j and its jobserver).
            tags=frozenset({"exclusive"}),
            source=SourceLocation(mt.file or str(path), mt.line or rule_lines.get(name)),
        )
    cycle = find_cycle({n: t.needs for n, t in targets.items()})
    if cycle:  # make drops circular prerequisites; be safe anyway
        raise ConfigError(f"{path}: make: prerequisites form a cycle: {' -> '.join(cycle)}")
    return Project(path, path.parent, Settings(), targets), default_names(db, targets)


def _rule_lines(path: Path) -> dict[str, int]:
    """Best effort: the line of the first ``target ...:`` rule naming each target in the
    Makefile itself (make reports where recipes are, not where recipe-less rules are)."""
    lines: dict[str, int] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return lines
    for no, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^([^\t#:=][^#:=]*?)\s*::?(?!=)", line)
        if m:
            for name in m.group(1).split():
                lines.setdefault(name, no)
    return lines


def _order(mt: database.MakeTarget, rule_lines: dict[str, int]) -> tuple:
    """Targets in Makefile order: the Makefile's own rules first, then included files'."""
    line = rule_lines.get(mt.name)
    if line is not None:
        return (0, "", line, mt.name)
    return (1, mt.file or "", mt.line or 0, mt.name)


def default_names(db: database.Database, targets: dict[str, Target]) -> list[str]:
    """What ``memotest build`` with no names builds: ``MEMOTEST_TARGETS`` (names or globs,
    ``%`` as ``*``) if the Makefile defines it, else make's default goal."""
    if db.memotest_targets is not None:
        names = [n.removeprefix(PREFIX) for n in targets]
        hits = []
        for pattern in db.memotest_targets:
            pat = pattern.replace("%", "*")
            hits += [PREFIX + n for n in names if fnmatch.fnmatchcase(n, pat)]
        return list(dict.fromkeys(hits))
    if db.default_goal and PREFIX + db.default_goal in targets:
        return [PREFIX + db.default_goal]
    return []


def resolve(project: Project, name: str) -> list[str] | None:
    """``test`` stands for ``make:test``; other names are left to the core."""
    if name in project.targets or (PREFIX + name) not in project.targets:
        return None
    return [PREFIX + name]


def closure(project: Project, names: list[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(names)
    while stack:
        n = stack.pop()
        if n in seen or n not in project.targets:
            continue
        seen.add(n)
        stack.extend(project.targets[n].needs)
    return seen
