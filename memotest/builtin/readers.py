"""memotest's own readers (``memotest/inputs/readers.py``): files whose reader takes only a
part of them, whatever the project's test runner.

- **``entry_points.txt``** of an installed distribution: ``importlib.metadata`` reads it
  whenever a plugin loader (stevedore, a test runner's) asks a distribution for its entry
  points, and keeps only the ``name = value`` lines of each ``[group]``. Tools that write
  it (pbr, setuptools) change its blank lines and comments from one release to the next.
  It holds by its ``(group, name, value)`` triples when ``Distribution.read_text``,
  called from ``Distribution.entry_points`` (``importlib.metadata``, or the
  ``importlib_metadata`` backport), opened it: test code that reads the text itself
  (``read_text`` directly, ``open``) keeps it whole.
- **a gzip file** (``*.gz``) read through Python's ``gzip`` module, which shows its reader
  the data and the header's time, never the header's file name: it holds by its bytes
  less the header's file name (``FNAME``) and header checksum (``FHCRC``) when
  ``gzip.GzipFile`` opened it. A property-testing library that rewrites its Unicode
  tables (``codec-*.json.gz``) at every run, the same data under the random name of the
  temporary file it wrote first, made every test that draws text re-run every other one.
- **a git index** (``.git/index``), whoever read it: by its entries without the stat
  data git caches of each file (``memotest/builtin/git_index.py``).
"""

from __future__ import annotations

import json

from memotest.hookspecs import hookimpl
from memotest.inputs.readers import UNPARSED, Caller, Reader, part_digest

ENTRY_POINTS = "entry-points"
GZIP_DATA = "gzip"


def entry_points_digest(data: bytes) -> str:
    """The digest of the entry points ``importlib.metadata`` parses out of an
    ``entry_points.txt`` (its ``Sectioned.section_pairs``): each line stripped; blank
    lines and ``#`` comments skipped; ``[group]`` starts a group; any other line in a
    group is ``name = value``, split at the first ``=``, both stripped; lines before the
    first group are ignored. The digest is of the ``(group, name, value)`` triples in
    order, or :data:`UNPARSED` for what a parser of another version could read
    otherwise: text that is not UTF-8, a line with no ``=``, a ``;`` comment."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return UNPARSED
    group = None
    triples = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
            continue
        if line.startswith(";") or "=" not in line:
            return UNPARSED
        if group is None:
            continue
        name, value = line.split("=", 1)
        triples.append([group, name.strip(), value.strip()])
    return part_digest(ENTRY_POINTS, json.dumps(triples).encode())


#: gzip header flags (RFC 1952).
_FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 2, 4, 8, 16


def gzip_digest(data: bytes) -> str:
    """The digest of what ``gzip.GzipFile`` shows of a gzip file: every byte but the
    first member's header file name and header checksum (its flags cleared), or
    :data:`UNPARSED` for what is not a gzip file with a well-formed first header."""
    if len(data) < 10 or data[:3] != b"\x1f\x8b\x08":
        return UNPARSED
    flags = data[3]
    pos = 10
    kept = [data[:3], bytes([flags & ~(_FNAME | _FHCRC)]), data[4:10]]
    if flags & _FEXTRA:
        if len(data) < pos + 2:
            return UNPARSED
        end = pos + 2 + int.from_bytes(data[pos : pos + 2], "little")
        if len(data) < end:
            return UNPARSED
        kept.append(data[pos:end])
        pos = end
    if flags & _FNAME:
        end = data.find(b"\0", pos)
        if end < 0:
            return UNPARSED
        pos = end + 1
    if flags & _FCOMMENT:
        end = data.find(b"\0", pos)
        if end < 0:
            return UNPARSED
        kept.append(data[pos : end + 1])
        pos = end + 1
    if flags & _FHCRC:
        pos += 2
    if len(data) < pos:
        return UNPARSED
    kept.append(data[pos:])
    return part_digest(GZIP_DATA, b"".join(kept))


def _git_index_digest(data: bytes, path: str) -> str:
    """``git_index.git_index_digest``, imported when an index is read (hashlib, struct:
    every command loads this plugin)."""
    from memotest.builtin.git_index import git_index_digest

    return git_index_digest(data, path)


READERS = [
    Reader(
        name=ENTRY_POINTS,
        match="entry_points.txt",
        callers=(
            Caller(
                files=("/importlib/metadata/__init__.py", "/importlib_metadata/__init__.py"),
                function="read_text",
                called_from="entry_points",
                depth=8,
            ),
        ),
        digest=lambda data, path: entry_points_digest(data),
        holds_by="its entry points",
        unparsed="no longer parses as entry points",
    ),
    Reader(
        name=GZIP_DATA,
        match="*.gz",
        callers=(Caller(files=("/gzip.py",), function="__init__", depth=1),),
        digest=lambda data, path: gzip_digest(data),
        holds_by="its gzip data",
        unparsed="is no longer a gzip file",
    ),
    # Whoever reads it: git, a C program (``memotest/builtin/git_index.py``).
    Reader(
        name="git-index",
        match="index",
        callers=(),
        digest=lambda data, path: _git_index_digest(data, path),
        holds_by="its entries",
        unparsed="no longer parses as a git index",
    ),
]


@hookimpl
def memotest_readers() -> list[Reader]:
    return READERS
