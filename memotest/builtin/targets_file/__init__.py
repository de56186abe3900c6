"""Built-in plugin: loads ``memotest.toml`` / ``memotest.yaml`` targets files.

The data flow: the file is found (:func:`find_targets_file`), its text read into data with
the line of every key (:mod:`.syntax`), and the data checked and made into a
:class:`~memotest.load.config.Project` (:mod:`.check`, with ``foreach`` groups expanded by
:mod:`.foreach`). Every mistake is a :class:`ConfigError` naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path

from memotest.builtin.targets_file.check import Checker
from memotest.builtin.targets_file.syntax import parse
from memotest.errors import ConfigError
from memotest.hookspecs import hookimpl
from memotest.load.config import Project
from memotest.load.plugins import LoadRequest

FILE_NAMES = ("memotest.toml", "memotest.yaml", "memotest.yml")
SUFFIXES = (".toml", ".yaml", ".yml")


@hookimpl(tryfirst=True)
def memotest_load_targets(request: LoadRequest) -> Project | None:
    if request.source not in (None, "memotest", "toml", "yaml"):
        return None
    if request.path is not None:
        if request.path.suffix not in SUFFIXES and request.source is None:
            return None
        return load(request.path)
    try:
        path = find_targets_file(request.cwd)
    except ConfigError:
        if request.source is None:
            return None  # let other plugins auto-detect their files
        raise
    return load(path)


def find_targets_file(start: Path) -> Path:
    """The targets file in ``start`` or its nearest parent that has one."""
    for folder in (start, *start.parents):
        for name in FILE_NAMES:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    raise ConfigError(
        f"no memotest.toml found in {start} or any parent folder "
        "(create one, or name a file with -f FILE)"
    )


def load(path: Path) -> Project:
    """Parses and checks the targets file at ``path``."""
    path = path.resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    data, lines = parse(path, text)
    return Checker(path, data, lines).build()
