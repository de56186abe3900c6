"""``pyproject.toml`` read only by pytest, for its own table: which table.

pytest reads the ``pyproject.toml`` of the folders it searches for its configuration, and
uses only ``[tool.pytest]`` and ``[tool.pytest.ini_options]`` of it. A release that bumps
a version, a dependency or a linter's settings there changes nothing pytest sees; as a
whole-file input, it re-ran every test of the project.

In a run forked from a warm worker, an audit hook sees every ``open`` made through
Python and who made it. A ``pyproject.toml`` that only pytest's configuration search
(``_pytest/config/findpaths.py``) opened, in the run's own process and its worker, and
that no other process read, is then an input by its ``tool.pytest`` table as TOML parses
it (``Kind.SECTION``): a file that no longer parses, or whose table changed in any way,
runs the target again.

What this rests on: that C code in the run's process does not read the file (the audit
hook cannot see it), and that memotest's TOML parser accepts what the run's did (a file
memotest cannot parse is kept whole).

The first part of this module runs inside the warm worker (``warm.py`` includes its
source), in the target's interpreter: the standard library only, Python 3.10 syntax.
"""

import os
import sys

#: The files read for one table, and the module whose code reads them for it (pytest's
#: configuration search: ``load_config_dict_from_file`` up to pytest 9.1,
#: ``_parse_toml_file`` from 9.2).
SECTION_FILES = ("pyproject.toml",)
SECTION_READER = "/_pytest/config/findpaths.py"
#: Path -> whether every open of it so far was the reader's.
OPENS = {}


def on_open(event, args):
    """The audit hook: who opened a ``pyproject.toml``."""
    if event != "open" or not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path.endswith(SECTION_FILES):
        return
    where = os.path.normpath(os.path.join(os.getcwd(), path))
    if os.path.basename(where) not in SECTION_FILES:
        return
    frame = sys._getframe(1)
    ours = False
    for _ in range(8):
        if frame is None:
            break
        if frame.f_code.co_filename.endswith(SECTION_READER):
            ours = True
            break
        frame = frame.f_back
    OPENS[where] = OPENS.get(where, True) and ours


def watch_sections():
    sys.addaudithook(on_open)


def section_report():
    """The files only pytest's configuration search opened."""
    return sorted(path for path, ours in OPENS.items() if ours)


# -- memotest's side (never run in the worker) ---------------------------------------------

#: The digest of a file that is not valid UTF-8 TOML, or whose ``tool`` is no table.
UNPARSED = "unparsed"


def table_digest(data: bytes) -> str:
    """The digest of what pytest takes from a ``pyproject.toml``: its ``tool.pytest``
    table (JSON with sorted keys), or :data:`UNPARSED`."""
    import json

    import xxhash

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
    return "tool.pytest:" + xxhash.xxh3_128_hexdigest(text.encode())
