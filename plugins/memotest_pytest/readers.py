"""pytest's readers (``memotest/inputs/readers.py``): a ``pyproject.toml`` holds by its
``tool.pytest`` table, a ``tox.ini`` by its ``[pytest]`` section and a ``setup.cfg`` by its
``[tool:pytest]`` (and ``[pytest]``) section, when only pytest's configuration search opened
them.

pytest reads the ``pyproject.toml`` of the folders it searches for its configuration,
and uses only ``[tool.pytest]`` and ``[tool.pytest.ini_options]``. A release that bumps a
version, a dependency or a linter's settings there changes nothing pytest sees; as a
whole-file input it re-ran every test of the project. The open counts when the code of
pytest's configuration search made it (``_pytest/config/findpaths.py``:
``load_config_dict_from_file`` up to pytest 9.1, ``_parse_toml_file`` from 9.2), and the
file then holds by its ``tool.pytest`` table as TOML parses it.
"""

from __future__ import annotations

import json
import os
import sys

from memotest.hookspecs import hookimpl
from memotest.inputs.readers import UNPARSED, Caller, Reader, part_digest

PYTEST_TABLE = "tool.pytest"
#: The code of pytest's configuration search.
CONFIG_SEARCH = Caller(files=("/_pytest/config/findpaths.py",), depth=8)


def table_digest(data: bytes) -> str:
    """The digest of what pytest takes from a ``pyproject.toml``: its ``tool.pytest``
    table (JSON with sorted keys), or :data:`UNPARSED`."""
    if sys.version_info >= (3, 11):  # imported here: every command loads this plugin
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    try:
        config = tomllib.loads(data.decode("utf-8"))
        table = config.get("tool", {}).get("pytest", {})
        text = json.dumps(table, sort_keys=True, default=repr)
    except (ValueError, AttributeError, TypeError):  # TOMLDecodeError is a ValueError
        return UNPARSED
    return part_digest(PYTEST_TABLE, text.encode())


READER = Reader(
    name=PYTEST_TABLE,
    match="pyproject.toml",
    callers=(CONFIG_SEARCH,),
    digest=lambda data, path: table_digest(data),
    holds_by="its [tool.pytest] table",
    unparsed="no longer parses as TOML (pytest reads its [tool.pytest] table)",
)


#: The sections pytest takes from each generic ini file it searches (``findpaths``):
#: ``tox.ini``'s ``[pytest]``; ``setup.cfg``'s ``[tool:pytest]``, and ``[pytest]``, with
#: which pytest refuses to start.
INI_TAKES = {"tox.ini": ("pytest",), "setup.cfg": ("tool:pytest", "pytest")}
KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def ini_sections(text: str) -> dict[str, str] | None:
    """Each section of the ini ``text``, its lines as they are (the header's included),
    or None where ``text`` is not in the plain form of the module doc."""
    sections: dict[str, str] = {}
    name: str | None = None
    keys: set[str] = set()
    after_key = False  # a continuation follows a key, blank and comment lines between
    for line in text.removeprefix("\ufeff").splitlines(True):
        bare = line.strip()
        if not bare or bare[0] in "#;":
            pass
        elif line[0] == "[":
            header = line.rstrip()
            name = header[1:-1]
            if not header.endswith("]") or any(c in header for c in "#;"):
                return None
            if not name or name != name.strip() or name in sections:
                return None
            keys, after_key = set(), False
            sections[name] = ""
        elif line[0].isspace():
            if not after_key:
                return None
        else:
            cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
            key = line[:cut].strip() if cut > 0 else ""
            if name is None or not key or not set(key) <= KEY_CHARS or key in keys:
                return None
            keys.add(key)
            after_key = True
        if name is not None:
            sections[name] += line
    return sections


def ini_digest(data: bytes, path: str) -> str:
    """The digest of what pytest takes from a ``tox.ini`` or ``setup.cfg``: the text of its
    sections (:data:`INI_TAKES`), or their absence; :data:`UNPARSED` for a file not in
    the plain form."""
    base = os.path.basename(path)
    try:
        sections = ini_sections(data.decode("utf-8"))
    except UnicodeDecodeError:
        sections = None
    if sections is None or base not in INI_TAKES:
        return UNPARSED
    taken = {name: sections.get(name) for name in INI_TAKES[base]}
    return part_digest(INI_READER[base], json.dumps(taken, sort_keys=True).encode())


INI_READER = {"tox.ini": "pytest-tox-ini", "setup.cfg": "pytest-setup-cfg"}
INI_READERS = [
    Reader(
        name=INI_READER[base],
        match=base,
        callers=(CONFIG_SEARCH,),
        digest=ini_digest,
        holds_by=f"its [{INI_TAKES[base][0]}] section",
        unparsed=f"is no longer plain ini (pytest reads its [{INI_TAKES[base][0]}] section)",
    )
    for base in INI_TAKES
]


@hookimpl
def memotest_readers() -> list[Reader]:
    return [READER, *INI_READERS]
