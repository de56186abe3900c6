"""Loads ``memotest_walk`` into a pytest command that memotest memoizes for another tool.

A tox env's commands (``memotest_tox.seq``) and a nox session's ``session.run`` calls
(``memotest_nox.helper``) are memoized as they are written, so their pytest would stat
every entry of the rootdir on its way to the tests and make ``README.md`` or ``CHANGES.md``
an input (see ``walk_path/memotest_walk.py``). :func:`narrowed` rewrites such a command to
load that plugin: ``-p memotest_walk`` right after ``pytest`` (so it reaches this pytest
only, not one the tests start themselves), and the plugin's folder, which holds nothing
else, appended to ``PYTHONPATH`` (so the env's Python finds it without memotest installed;
the user's own entries keep their precedence).

The commands recognised are those whose interpreter reads ``PYTHONPATH`` and whose pytest
arguments are plain to find: ``pytest ARGS`` and ``py.test ARGS`` (the console script),
``python[X[.Y]] -m pytest ARGS`` with no interpreter option, and ``coverage run [-OPTION
...] -m pytest ARGS`` (options written with ``=``). Anything else runs as written: pytest
then walks the rootdir as usual and the files it stats are inputs (a re-run, never a
false skip).

Only the standard library here: ``memotest_tox.seq`` imports this module, and everything
it imports is an input of every tox env's record.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

#: The plugin's module name, and the folder that holds it (and nothing else).
PLUGIN = "memotest_walk"
FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "walk_path")
_PYTEST = ("pytest", "py.test")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")


def pytest_args_at(argv: Sequence[str]) -> int | None:
    """Where pytest's own arguments begin in ``argv``, if it is a pytest command that can
    load the plugin; None otherwise."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if name in _PYTEST:
        return 1
    if _PYTHON.fullmatch(name) and len(argv) >= 3 and argv[1] == "-m" and argv[2] in _PYTEST:
        return 3
    if name == "coverage" and len(argv) >= 2 and argv[1] == "run":
        for at in range(2, len(argv) - 1):
            if argv[at] == "-m":
                return at + 2 if argv[at + 1] in _PYTEST else None
            if not argv[at].startswith("-"):
                return None  # a program to run, or an option's value: not sure
    return None


def narrowed(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` and ``env`` with ``memotest_walk`` loaded, when ``argv`` runs pytest."""
    at = pytest_args_at(argv)
    if at is None:
        return list(argv), dict(env)
    path = env.get("PYTHONPATH", "")
    out = dict(env, PYTHONPATH=path + os.pathsep + FOLDER if path else FOLDER)
    return [*argv[:at], "-p", PLUGIN, *argv[at:]], out
