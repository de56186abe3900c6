"""Files read only by one reader, for what it parses out of them: that part.

Some files are read by every test of a project, but only for a part of them:

- **``pyproject.toml``**: pytest reads the one of the folders it searches for its
  configuration, and uses only ``[tool.pytest]`` and ``[tool.pytest.ini_options]``. A
  release that bumps a version, a dependency or a linter's settings there changes nothing
  pytest sees.
- **``entry_points.txt``** of an installed distribution: ``importlib.metadata`` reads it
  whenever pytest, stevedore or any plugin loader asks a distribution for its entry points,
  and keeps only the ``name = value`` lines of each ``[group]``. Tools that write it (pbr,
  setuptools) change its blank lines and comments from one release to the next.
- **a gzip file** (``*.gz``) read through Python's ``gzip`` module, which shows its
  reader the data and the header's time, never the header's file name. Hypothesis
  rewrites its Unicode tables (``.hypothesis/unicode_data/*/codec-*.json.gz``) at every
  run, the same data under the random name of the temporary file it wrote first.

As whole-file inputs, the first two re-ran every test of the project; the third made
every test that draws text re-run every other one.

In a run forked from a warm worker, an audit hook sees every ``open`` made through
Python and who made it. Such a file that only its reader opened, in the run's own process
and its worker, and that no other process read, is then an input by what the reader
parses out of it (``Kind.SECTION``):

- a ``pyproject.toml`` opened by pytest's configuration search (code of
  ``_pytest/config/findpaths.py``), by its ``tool.pytest`` table as TOML parses it;
- an ``entry_points.txt`` opened by ``Distribution.read_text`` called from
  ``Distribution.entry_points`` (``importlib.metadata``, or the ``importlib_metadata``
  backport), by its ``(group, name, value)`` triples in order, as that parser makes them.
  Test code that reads the text itself (``read_text`` directly, ``open``) keeps it whole;
- a ``*.gz`` file opened by ``gzip.GzipFile``, by its bytes less the header's file name
  (``FNAME``) and header checksum (``FHCRC``), which ``gzip`` reads past and shows nobody.

A file that no longer parses, or whose part changed in any way, runs the target again.

What this rests on: that C code in the run's process does not read the file (the audit
hook cannot see it), and that memotest's parser accepts what the run's did (a file
memotest cannot parse, or that a reader of another version could parse differently, is
kept whole).

The worker notes who opened such a file (``memotest/worker/sections.py``, driven by the
readers table); this module takes the parts.
"""

import os
import sys

#: A gzip file's name.
GZIP_SUFFIX = ".gz"

#: The digest of a file memotest cannot parse as its reader would.
UNPARSED = "unparsed"
#: The digests' prefixes: which part of which file a ``SECTION`` input holds by.
PYTEST_TABLE = "tool.pytest:"
ENTRY_POINTS = "entry-points:"
GZIP_DATA = "gzip:"


def section_digest(path: str, data: bytes) -> str:
    """The digest of what the reader of the file at ``path`` takes from it (by its name:
    the readers of ``memotest.inputs.readers``), or :data:`UNPARSED`."""
    name = os.path.basename(path)
    if name == "pyproject.toml":
        return table_digest(data)
    if name == "entry_points.txt":
        return entry_points_digest(data)
    if name.endswith(GZIP_SUFFIX):
        return gzip_digest(data)
    return UNPARSED


def section_phrase(digest: str) -> str:
    """What a ``SECTION`` input holds by, for ``explain``."""
    if digest.startswith(ENTRY_POINTS):
        return "its entry points"
    if digest.startswith(GZIP_DATA):
        return "its gzip data"
    return "its [tool.pytest] table"


def _xxh(data: bytes) -> str:
    import xxhash

    return xxhash.xxh3_128_hexdigest(data)


def table_digest(data: bytes) -> str:
    """The digest of what pytest takes from a ``pyproject.toml``: its ``tool.pytest``
    table (JSON with sorted keys), or :data:`UNPARSED`."""
    import json

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    try:
        config = tomllib.loads(data.decode("utf-8"))
        table = config.get("tool", {}).get("pytest", {})
        text = json.dumps(table, sort_keys=True, default=repr)
    except (ValueError, AttributeError, TypeError):  # TOMLDecodeError is a ValueError
        return UNPARSED
    return PYTEST_TABLE + _xxh(text.encode())


def entry_points_digest(data: bytes) -> str:
    """The digest of the entry points ``importlib.metadata`` parses out of an
    ``entry_points.txt`` (its ``Sectioned.section_pairs``): each line stripped; blank
    lines and ``#`` comments skipped; ``[group]`` starts a group; any other line in a
    group is ``name = value``, split at the first ``=``, both stripped; lines before the
    first group are ignored. The digest is of the ``(group, name, value)`` triples in
    order, or :data:`UNPARSED` for what a parser of another version could read
    otherwise: text that is not UTF-8, a line with no ``=``, a ``;`` comment."""
    import json

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
    return ENTRY_POINTS + _xxh(json.dumps(triples).encode())


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
    return GZIP_DATA + _xxh(b"".join(kept))
