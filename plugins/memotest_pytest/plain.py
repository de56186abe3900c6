"""``memotest_walk`` for the pytest commands of a targets file (``python -m pytest ...``).

A target whose command is a plain pytest command (``[targets.unit] command = "python -m
pytest -q {path}"``, an argv or a string of one simple command) runs as a fresh process,
not forked from a warm worker. Its pytest would stat every entry of the rootdir on its way
to the tests, and ask ``is_dir()`` of each: ``memotest.toml``, ``tests/data.json`` in the
run's modification-time order, so that a fresh clone whose checkout wrote them in other
clock ticks ran again (issue 25). :func:`memotest_before_target` loads ``memotest_walk``
into it, as the tox and nox adapters do (``walk.py``): it keeps pytest from stat'ing what
it walks past, and its probes (``is_file``, ``exists``...) are untimed from then on
(``memotest/worker/untimed.py``). pytest's search for its ini file comes before any plugin
it loads: that probe is timed still, and the ini file it finds is in the order. Its
folder's ``sitecustomize.py`` starts the listing watch at the interpreter's start-up, so
the current folder (first on ``sys.path``) is held by the names imports looked for there:
a new ``dist/`` or ``build/`` re-runs nothing.

It is loaded through the environment (``PYTEST_ADDOPTS=-p memotest_walk``, the plugin's
folder on ``PYTHONPATH``), which is not part of the target's key: it changes what pytest
stats on its way, never which tests run nor their outcomes. A pytest that a test starts
inherits it (unlike the adapters' ``-p`` on the command line); pytester's in-process and
subprocess runs clear ``PYTEST_ADDOPTS``. A command with shell syntax (``&&``, ``|``,
``$VAR``, a redirection), an interpreter option or a variable assignment before the
program runs as written.
"""

from __future__ import annotations

import shlex

from memotest.hookspecs import hookimpl
from memotest.load.plugins import Config
from memotest.model import Target
from memotest_pytest.walk import PLUGIN, narrowed, pytest_args_at

#: Characters that make a string command more than one plain command.
SHELL_SYNTAX = frozenset(";&|<>()$`\n*?[]{}~#")
#: The variable pytest reads extra arguments from (before the command line's).
ADDOPTS = "PYTEST_ADDOPTS"


def plain_pytest(target: Target) -> bool:
    """Whether ``target`` runs one pytest command that ``memotest_walk`` can load into."""
    if target.warm:
        return False  # forked from a warm worker: its own watch
    if isinstance(target.command, str):
        if SHELL_SYNTAX.intersection(target.command):
            return False
        argv = shlex.split(target.command)
    else:
        argv = list(target.command)
    return pytest_args_at(argv) is not None


@hookimpl
def memotest_before_target(target: Target, env: dict[str, str], config: Config) -> None:
    if not plain_pytest(target):
        return
    _argv, loaded = narrowed(["pytest"], env)
    opts = env.get(ADDOPTS, "")
    env["PYTHONPATH"] = loaded["PYTHONPATH"]
    env[ADDOPTS] = f"-p {PLUGIN} {opts}" if opts else f"-p {PLUGIN}"
