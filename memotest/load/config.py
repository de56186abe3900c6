"""What every loader makes: a :class:`Project` (a targets file's folder, settings and
targets) and its :class:`Settings`, with the defaults that hold whoever loaded them.

The ``memotest.toml`` loader is the built-in plugin :mod:`memotest.builtin.targets_file`;
other tools' files are read by their plugins, and tox, nox and make make settings of their
own. The paths that are never inputs by default are the core's (bytecode, the store) plus
the patterns plugins add through ``memotest_ignore`` (a tool's own cache).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memotest.errors import ConfigError, UsageError
from memotest.load import plugins
from memotest.model import Target, output_problem

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}


def parse_size(value: object) -> int | None:
    """Bytes of a size written as a whole number of bytes or a string like ``"2 GiB"``,
    ``"500 MB"``, ``"1.5GB"`` (kB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB of
    1024); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip().replace(" ", "")
    number = text.rstrip("BbKkMmGgTtIi")
    unit = _SIZE_UNITS.get(text[len(number) :].lower())
    try:
        amount = float(number)
    except ValueError:
        return None
    if unit is None or not math.isfinite(amount * (unit or 1)) or amount <= 0:
        return None  # "1e400 TB" included: no float holds it
    size = int(amount * unit)
    return size if size > 0 else None


#: Inherited variables that are passed to targets (and part of their key) by default.
DEFAULT_PASS_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "PYTHON*",
    "VIRTUAL_ENV",
)
#: Paths that are never inputs, whatever the targets file says: bytecode is derived from
#: the sources, which are inputs; the store is memotest's own.
DEFAULT_IGNORE = ("**/__pycache__/**", "**/.memotest/**")


def default_ignore() -> tuple[str, ...]:
    """:data:`DEFAULT_IGNORE` and the patterns of every plugin's ``memotest_ignore``."""
    return DEFAULT_IGNORE + plugins.ignore_patterns(plugins.Config())


#: The store's size bound when the targets file sets none (``settings.max_size``, see
#: :mod:`memotest.store.gc`): room for thousands of variants with their logs and outputs
#: (a record of 2,000 inputs takes about 10 kB), small beside a checkout's build folders
#: and virtual environments.
DEFAULT_MAX_SIZE = 1 << 30


@dataclass
class Settings:
    jobs: int | None = None
    pass_env: tuple[str, ...] = DEFAULT_PASS_ENV
    ignore: tuple[str, ...] = field(default_factory=default_ignore)
    #: Endpoints outside the target's tree whose data the user vouches never changes a
    #: result (``memotest/world/services.py``); part of every target's key.
    services: tuple[str, ...] = ()
    #: The roots the user names besides the project's (``name -> absolute path``):
    #: records are relative to them (:mod:`memotest.world.roots`).
    roots: dict[str, str] = field(default_factory=dict)
    #: The store's size bound in bytes (:mod:`memotest.store.gc`): past it, the least
    #: recently used recorded runs are evicted.
    max_size: int = DEFAULT_MAX_SIZE
    #: The remote cache's URL (``memotest/remote/``); ``--remote`` and ``MEMOTEST_REMOTE``
    #: win over it.
    remote: str | None = None
    #: Seconds a request to the remote may take, and each phase of a build that talks to
    #: it (the fetch before the build runs anything, the uploads at its end).
    remote_timeout: float | None = None
    #: The most bytes of one answer of the remote that are read (a bigger one is refused).
    remote_max_answer: int | None = None
    #: ``"tests"``: a stale test file runs only the tests whose result could have changed
    #: (:mod:`memotest.check.select`); ``"files"``: whole. ``build --select`` wins over it.
    select: str = "files"


@dataclass
class Project:
    """A loaded targets file: its path, its folder (the project root), settings, targets."""

    path: Path
    root: Path
    settings: Settings
    targets: dict[str, Target] = field(default_factory=dict)
    #: A loader's own names (``//pkg/...``, a test suite, ``test`` for ``make:test``):
    #: called for each name on the command line, it returns the target names the name
    #: stands for, or None to leave it to the core's rules (exact name, group, glob).
    resolve: Callable[[str], list[str] | None] | None = None
    #: What a build names when it names nothing (None: every target).
    default: list[str] | None = None
    #: The records of the loader's memoized commands (its collection) taken of the file
    #: system when they ran, to finish once the build's first targets started
    #: (``run_memoized``'s ``defer``): each is called with the build's store, or None.
    deferred: list[Callable[[Any], None]] = field(default_factory=list)


def find_cycle(edges: dict[str, tuple[str, ...]]) -> list[str] | None:
    """A cycle in ``edges`` as a list of names ending where it starts, or None."""
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        color[n] = 1
        stack.append(n)
        for m in edges.get(n, ()):
            if color.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if color.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = 2
        return None

    for n in edges:
        if n not in color:
            found = visit(n)
            if found:
                return found
    return None


def target_problems(target: Target) -> list[tuple[str, str]]:
    """What makes ``target`` impossible to run or record as it says, as ``(field, what is
    wrong and what to do)``; empty when it is fine. Data only, whoever loaded it.

    These are the values the operating system or memotest cannot take, which would
    otherwise fail in the middle of a build with a traceback, or do something else than
    written: a NUL byte (no C string holds one: in a command, an argv entry, an env value
    or name, a path), an env name that is empty or holds ``=`` (``A=B`` names ``A``), a
    command with nothing to run, a timeout that is not a finite number of seconds above
    0, a name with a control character (a status line or a report would be cut), and
    declared outputs that are not plain paths below the target's folder (a replay writes
    them back: ``/etc/x`` or ``../x`` would be written outside the project). A name that
    is not UTF-8 (a ``foreach`` or test-file target made from a file name that is not) cannot
    be stored, reported or printed: it is refused, naming the file to rename."""
    out: list[tuple[str, str]] = []
    if any(ord(c) < 32 or ord(c) == 127 for c in target.name):
        out.append(("name", "its name holds a control character"))
    elif not _utf8(target.name):
        out.append(
            (
                "name",
                "its name is not UTF-8 (made from a file name that is not: rename the file)",
            )
        )
    words = [target.command] if isinstance(target.command, str) else list(target.command)
    if any("\0" in w for w in words):
        out.append(("command", "the command holds a NUL byte (no program can be given one)"))
    elif not words or not words[0].strip():
        out.append(("command", "the command is empty (give the program to run first)"))
    for name, value in target.env:
        if not name or "=" in name or "\0" in name:
            out.append(
                ("env", f"env name {name!r} is not a variable name (no '=', NUL or empty name)")
            )
        elif "\0" in value:
            out.append(("env", f"env value of {name} holds a NUL byte (no variable can hold one)"))
    if "\0" in target.cwd:
        out.append(("cwd", "cwd holds a NUL byte"))
    if target.timeout is not None and not (math.isfinite(target.timeout) and target.timeout > 0):
        out.append(
            ("timeout", f"timeout must be a finite number of seconds > 0, not {target.timeout}")
        )
    for rel in target.outputs:
        problem = output_problem(rel)
        if problem:
            out.append(("outputs", problem))
    for path in target.inputs:
        if "\0" in path:
            out.append(("inputs", f"declared input {path!r} holds a NUL byte"))
    return out


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_project(project: Project) -> None:
    """Raises a :class:`ConfigError` naming the first target :func:`target_problems`
    finds wrong, where it was defined (``file:line``), or whose cwd is a file. Every
    loader's project goes through it (:func:`load_project`)."""
    for target in project.targets.values():
        problems = target_problems(target)
        if not problems and os.path.exists(target.cwd) and not os.path.isdir(target.cwd):
            problems = [("cwd", f"cwd {target.cwd} is not a folder")]
        if problems:
            where = target.source or project.path
            raise ConfigError(f"{where}: target {target.name!r}: {problems[0][1]}")


def load_project(config: plugins.Config, cwd: Path | None = None) -> Project:
    """Loads the targets named by ``-f``/``--from`` (or found in ``cwd``) via plugins."""
    options = config.options
    source = getattr(options, "source", None)
    path = Path(options.file) if getattr(options, "file", None) else None
    broken = config.pluginmanager.broken
    if source and source in broken:
        raise UsageError(f"--from {source}: the plugin failed to load: {broken[source]}")
    request = plugins.LoadRequest(path=path, source=source, cwd=cwd or Path.cwd(), options=options)
    project = plugins.call("memotest_load_targets", request=request, config=config)
    if project is None:
        if source:
            known = ", ".join(plugins.plugin_names())
            raise UsageError(f"--from {source}: no plugin loads that source (plugins: {known})")
        if path is not None:
            raise ConfigError(f"{path}: no plugin knows how to read this file")
        raise ConfigError(
            f"no memotest.toml found in {request.cwd} or any parent folder, and no plugin "
            "recognised a project here (create memotest.toml, or name a file with -f FILE)"
        )
    check_project(project)
    return project
