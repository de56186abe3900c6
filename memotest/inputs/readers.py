"""Readers: "this file, when only this code read it, holds by this part of it".

Some files are read by every test of a project, but only for a part of them: a
configuration file of which the test runner reads one table, the ``entry_points.txt`` of
an installed distribution of which a plugin loader keeps the ``name = value`` lines, a
gzip file whose reader never sees the file name in its header. As whole-file inputs, an
edit of any other part re-runs every test that read them.

A :class:`Reader` says so as data: which files (``match``, an ``fnmatch`` pattern for the
base name), whose opens count (``callers``: the code that must have made the ``open``,
as frame patterns the warm worker's audit hook checks), what the part is (``digest``:
the digest of the part, starting with the reader's ``name`` and ``:``, so that a
``section`` digest says which part it holds by; :data:`UNPARSED` for a file memotest
cannot parse as the reader would), and the words ``explain`` uses. A reader with no
callers holds its files by their part whoever read them. Readers come from plugins, through
the hook ``memotest_readers`` (memotest's own: ``memotest/builtin/readers.py``); a path's
reader is the first registered reader whose ``match`` fits its base name.

What this rests on: that C code in the run's process does not read the file (the audit
hook cannot see it), and that the reader's ``digest`` accepts what the run's parser did
(a file it cannot parse, or that a parser of another version could read differently, is
:data:`UNPARSED` and stays whole).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass

import xxhash

from memotest.load import plugins

#: The digest of a file memotest cannot parse as its reader would: it stays whole.
UNPARSED = "unparsed"


@dataclass(frozen=True)
class Caller:
    """Code whose ``open`` of a file counts as its reader's. It matches an open when,
    walking up at most ``depth`` frames from the frame that called ``open``, the first
    frame whose ``co_filename`` ends with one of ``files`` has ``co_name == function`` (if
    set) and its caller frame has ``co_name == called_from`` in the same file (if set)."""

    files: tuple[str, ...]
    function: str | None = None
    called_from: str | None = None
    depth: int = 8


@dataclass(frozen=True)
class Reader:
    """Files named like ``match`` hold by the part ``digest`` takes, when only ``callers``
    opened them (or whoever did, without callers). ``digest(data, path)`` returns
    ``name + ":" + ...`` (:func:`part_digest`) or :data:`UNPARSED`; ``holds_by`` says what
    the part is (``its entry points``) and ``unparsed`` what a file that no longer parses
    is (``no longer parses as entry points``), for ``explain``."""

    name: str
    match: str
    callers: tuple[Caller, ...]
    digest: Callable[[bytes, str], str]
    holds_by: str
    unparsed: str


def part_digest(reader_name: str, part: bytes) -> str:
    """A reader's digest of the part it takes: its name, ``:``, the part's xxh3-128."""
    return f"{reader_name}:{xxhash.xxh3_128_hexdigest(part)}"


#: The readers found, and the hook implementations they came from (a plugin registered
#: later, or unregistered, makes them be asked again), with the reader of each base name.
_found: tuple[tuple[object, ...], tuple[Reader, ...], dict[str, Reader | None]] | None = None


def _table() -> tuple[tuple[Reader, ...], dict[str, Reader | None]]:
    global _found
    impls = tuple(plugins.manager().hook.memotest_readers.get_hookimpls())
    if _found is None or _found[0] != impls:
        found = plugins.call("memotest_readers", config=plugins.Config())
        _found = (impls, tuple(r for batch in found for r in batch), {})
    return _found[1], _found[2]


def registered() -> tuple[Reader, ...]:
    """The readers of the process's plugin manager (``memotest_readers``, concatenated)."""
    return _table()[0]


def reader_for(path: str) -> Reader | None:
    """The reader of the file at ``path``: the first registered one whose ``match`` fits
    its base name, or None."""
    readers, by_name = _table()
    name = os.path.basename(path)
    if name not in by_name:
        by_name[name] = next((r for r in readers if fnmatch.fnmatchcase(name, r.match)), None)
    return by_name[name]


def digest_of(path: str, data: bytes) -> str:
    """What the reader of ``path`` takes from its bytes ``data``: the part's digest, or
    :data:`UNPARSED` (also when no reader reads such a file)."""
    reader = reader_for(path)
    return UNPARSED if reader is None else reader.digest(data, path)


def worker_table() -> list[dict]:
    """The readers that have callers, as the warm worker receives them in its start-up
    config (key ``"readers"``): its audit hook tells, by these, who opened what."""
    return [
        {
            "name": r.name,
            "match": r.match,
            "callers": [
                {
                    "files": list(c.files),
                    "function": c.function,
                    "called_from": c.called_from,
                    "depth": c.depth,
                }
                for c in r.callers
            ],
        }
        for r in registered()
        if r.callers
    ]
