"""pytest's configuration file and rootdir, pinned on the targets' command line.

The collection finds them (``collect.py``); each target then names them (``-c FILE
--rootdir DIR``) rather than have pytest search again, which would make every file it
looks into an input of every target (``pinned_config``).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The files pytest looks into for its configuration, in its order.
CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _config_between(folder: Path, top: Path, seen: dict[Path, bool] | None = None) -> bool:
    """Whether a folder from ``folder`` up to ``top`` (excluded) holds a file pytest would
    look into for its configuration. Checked at every build (the loader runs every time);
    ``seen`` caches the answer per folder across the files of one load."""
    seen = {} if seen is None else seen
    if folder == top:
        return False
    if folder in seen:
        return seen[folder]
    if top not in folder.parents:
        answer = True  # not below the configuration's folder: leave it to pytest
    elif any((folder / n).exists() for n in CONFIG_NAMES):
        answer = True
    else:
        answer = _config_between(folder.parent, top, seen)
    seen[folder] = answer
    return answer


def pinned_config(inipath: str | None, rootdir: Path, settings: bool = True) -> tuple[str, ...]:
    """pytest's options naming the configuration file and rootdir its collection found.

    Looking for its configuration, pytest reads each of ``pytest.ini``, ``.pytest.ini``,
    ``pyproject.toml``, ``tox.ini`` and ``setup.cfg`` that exists, in that order, up to
    the first with a pytest section, in every folder from the arguments' up. Every one of
    those would be an input of every target: a version bump in ``setup.cfg`` would re-run
    everything although pytest only looked for ``[tool:pytest]`` in it. Given ``-c FILE
    --rootdir DIR``, pytest reads that file only, with the same result as its search
    (``confcutdir`` defaults to the file's folder either way). Without a configuration
    file, or with one that sets nothing (since pytest 8.1, a ``pyproject.toml`` without a
    pytest table is the configuration file when there is no other), ``-c /dev/null`` with
    ``--confcutdir`` where pytest would put it (the file's folder, else the rootdir) gives
    the same empty configuration without reading the file. What the search read is an
    input of the collection, which runs again when any of it changes: if it then finds
    another file (a new ``pytest.ini``) or settings, the targets' commands change and they
    run again.
    """
    if inipath and settings:
        return ("-c", inipath, "--rootdir", str(rootdir))
    cut = os.path.dirname(inipath) if inipath else str(rootdir)
    return ("-c", os.devnull, "--rootdir", str(rootdir), "--confcutdir", cut)


def conftest_folder(folder: Path, top: Path, seen: dict[Path, Path] | None = None) -> Path:
    """The deepest folder from ``folder`` up to ``top`` (the configuration's folder)
    that holds a ``conftest.py``; ``top`` if none does. pytest run on a file of ``folder``
    imports as initial conftests those of the folders from ``top`` down to it, so a
    file of ``folder`` gets exactly the initial conftests of a file of this folder: the
    folders in between have none. One worker configured for this folder serves the files
    of every folder below it without a conftest of its own. ``seen`` caches the answer
    per folder across the files of one load. A ``folder`` not below ``top`` is its own."""
    seen = {} if seen is None else seen
    if folder in seen:
        return seen[folder]
    if folder == top or top not in folder.parents or (folder / "conftest.py").is_file():
        answer = folder
    else:
        answer = conftest_folder(folder.parent, top, seen)
    seen[folder] = answer
    return answer
