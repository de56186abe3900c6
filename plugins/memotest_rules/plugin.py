"""memotest plugin: the ``py_test``/``sh_test``/``test_suite`` rules of BUILD files.

``memotest build`` in a Bazel-style workspace (a ``MODULE.bazel``, ``WORKSPACE`` or
top-level ``BUILD``/``BUILD.bazel``, and no ``memotest.toml``), or ``-f BUILD`` /
``--from rules``, reads every BUILD file of the workspace without running it
(:mod:`memotest_rules.parse`) and turns each test rule into a memotest target named by its
label, ``//pkg:name``. ``docs/adapters/rules.md`` is the user's guide; in short:

* ``py_test`` runs ``python3 <main> <args>`` with ``PYTHONPATH`` = the workspace root (and
  the ``imports`` folders of the test and its deps); ``sh_test`` runs ``sh <src> <args>``.
  Both run in the workspace root, as Bazel's runfiles root, with ``env``.
* ``size`` and ``timeout`` give the timeout (60, 300, 900, 3600 s; default ``medium``).
* tags ``exclusive``, ``no-cache`` and ``flaky`` (and ``flaky = True``) mean what they mean
  to the core; ``external`` means never cached, as ``no-cache``; a ``manual`` test is built
  only when its exact label is named (or a ``test_suite`` lists it).
* ``srcs`` and ``data`` (after ``glob()``), and the ``srcs``/``data`` of the
  ``py_library``/``filegroup`` targets in ``deps`` (transitively), are declared inputs:
  fingerprinted in addition to what the tracer sees.
* Labels: ``//pkg:name``, ``//pkg:all`` (or ``:*``), ``//pkg/...``, ``//...`` and a
  ``test_suite``'s label select tests, as in ``bazel test``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memotest.errors import ConfigError
from memotest.hookspecs import hookimpl
from memotest.load.config import Project, Settings
from memotest.load.plugins import LoadRequest
from memotest_rules.layout import BUILD_NAMES, WORKSPACE_MARKERS

# Every memotest command loads this plugin and asks it for targets where no targets file
# answered first: the BUILD files' reader (memotest_rules.parse, workspace) is imported
# when there is a workspace to read.

SOURCES = ("rules", "bazel")


@hookimpl
def memotest_load_targets(request: LoadRequest) -> Project | None:
    if request.source not in (None, *SOURCES):
        return None
    if request.path is not None:
        path = request.path if request.path.is_absolute() else request.cwd / request.path
        if request.source is None and path.name not in (*BUILD_NAMES, *WORKSPACE_MARKERS):
            return None
        if not path.is_file():
            raise ConfigError(f"{path}: rules: no such file")
        if path.name in WORKSPACE_MARKERS:
            root, marker = path.parent, path
        else:
            root, marker = find_workspace(path.parent) or (path.parent, path)
    else:
        found = find_workspace(request.cwd)
        if found is None:
            if request.source in SOURCES:
                raise ConfigError(
                    f"{request.cwd}: rules: no MODULE.bazel, WORKSPACE or BUILD file here "
                    "or in a parent folder (name one with -f FILE)"
                )
            return None
        root, marker = found
    from memotest_rules.workspace import Workspace

    workspace = Workspace(root.resolve())
    note = workspace.unread_note()
    if note:
        sys.stderr.write(note + "\n")
    project = Project(marker.resolve(), root.resolve(), Settings(), {})
    project.targets = {label: t.target for label, t in workspace.tests.items()}
    project.default = [label for label, t in workspace.tests.items() if not t.manual]
    project.resolve = workspace.expand
    return project


def find_workspace(start: Path) -> tuple[Path, Path] | None:
    """The workspace root and its marker: the nearest folder from ``start`` up with a
    workspace file, else ``start`` itself if it holds a BUILD file."""
    start = start.absolute()
    for folder in (start, *start.parents):
        for name in WORKSPACE_MARKERS:
            if (folder / name).is_file():
                return folder, folder / name
    for name in BUILD_NAMES:
        if (start / name).is_file():
            return start, start / name
    return None
