"""The entry points of one group, found the way ``importlib.metadata.entry_points`` finds
them, without importing ``importlib.metadata``.

Every ``memotest`` command loads the plugins of the ``memotest`` group, and importing
``importlib.metadata`` (which imports ``email``, ``zipfile``, ``csv``, ``importlib.resources``
...) cost a third of a no-op build's start. What it does for ``entry_points(group=G)`` is
short, and done here the same way:

- the distributions are the ``*.dist-info`` and ``*.egg-info`` entries of each folder of
  ``sys.path``, in that order (``''``: the current folder); within one folder, grouped by
  normalized name in the order the listing first gives each name;
- a distribution whose normalized name was seen earlier is left out (the first one found
  wins, as ``importlib.metadata``'s ``_unique``);
- each one's ``entry_points.txt`` is read as ``Sectioned.section_pairs`` reads it: lines
  stripped, blank ones and those starting with ``#`` skipped, ``[group]`` starts a
  section, ``name = value`` split at the first ``=`` (a line without one raises).

This is the code of CPython 3.10.13 to 3.13 (``Lookup``, ``PathDistribution.
_normalized_name``, ``Sectioned``). Where ``importlib.metadata`` would look somewhere or
name something this does not handle — a ``sys.path`` entry that is a file (a zip) or an
``.egg``, a finder on ``sys.meta_path`` other than the standard ``PathFinder`` that can
find distributions, a ``.DIST-INFO`` not in lower case — this hands over to
``importlib.metadata`` itself. ``tests/test_start.py`` checks that both give the same entry
points, duplicates and all.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from importlib.machinery import PathFinder
from typing import Any

_SUFFIXES = (".dist-info", ".egg-info")
#: What ``read_text`` of a distribution takes as "no such file" (``importlib.metadata``).
_ABSENT = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


class EntryPoint:
    """``name = value`` of an entry point group; ``load`` imports what ``value`` names."""

    __slots__ = ("group", "name", "value")

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name = name
        self.value = value
        self.group = group

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"

    def load(self) -> Any:
        match = re.match(
            r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$",
            self.value,
        )
        if match is None:
            raise ValueError(f"malformed entry point value: {self.value!r}")
        obj: Any = importlib.import_module(match.group("module"))
        for attr in filter(None, (match.group("attr") or "").split(".")):
            obj = getattr(obj, attr)
        return obj


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group``, as ``importlib.metadata.entry_points(group=group)``
    lists them (objects with ``name``, ``value`` and ``load()``)."""
    paths = _distributions() if _plain_search() else None
    if paths is None:
        from importlib.metadata import entry_points as metadata_entry_points

        return list(metadata_entry_points(group=group))
    found = []
    seen: set[str] = set()
    for path in paths:
        name = _normalize(os.path.basename(path).rpartition(".")[0].partition("-")[0])
        if name in seen:
            continue
        seen.add(name)
        try:
            with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
                text = f.read()
        except _ABSENT:  # no entry points (or an .egg-info file)
            continue
        found += [EntryPoint(n, v, group) for n, v in _pairs(text, group)]
    return found


def _plain_search() -> bool:
    """Whether ``importlib.metadata`` would only list the folders of ``sys.path``."""
    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return False
    for entry in sys.path:
        if entry.endswith(".egg") or (entry and os.path.isfile(entry)):
            return False
    return True


def _distributions() -> list[str] | None:
    """The distributions' folders in ``importlib.metadata``'s order; None where it would
    name one differently (a suffix not in lower case)."""
    found = []
    for entry in sys.path:
        try:
            children = os.listdir(entry or ".")
        except OSError:  # as importlib.metadata: a folder that is not there has none
            continue
        by_name: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith(_SUFFIXES):
                if not child.endswith(_SUFFIXES):
                    return None
                name = _normalize(low.rpartition(".")[0].partition("-")[0])
                by_name.setdefault(name, []).append(os.path.join(entry, child))
        for paths in by_name.values():
            found += paths
    return found


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _pairs(text: str, group: str) -> Iterator[tuple[str, str]]:
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is not None:
            name, value = line.split("=", 1)  # ValueError without one, as importlib.metadata
            if section == group:
                yield name.strip(), value.strip()
