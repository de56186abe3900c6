"""What every loader makes: a :class:`Project` (a targets file's folder, settings and
targets) and its :class:`Settings`, with the defaults that hold whoever loaded them.

The ``memotest.toml`` loader is the built-in plugin :mod:`memotest.builtin.targets_file`;
other tools' files are read by their plugins, and tox, nox and make make settings of their
own. The paths that are never inputs by default are the core's (bytecode, the store) plus
the patterns plugins add through ``memotest_ignore`` (a tool's own cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memotest import plugins
from memotest.model import Target

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


@dataclass
class Settings:
    jobs: int | None = None
    pass_env: tuple[str, ...] = DEFAULT_PASS_ENV
    ignore: tuple[str, ...] = field(default_factory=default_ignore)
    #: Endpoints outside the target's tree whose data the user vouches never changes a
    #: result (``memotest/services.py``); part of every target's key.
    services: tuple[str, ...] = ()


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
