"""pytest's reader (``memotest/inputs/readers.py``): a ``pyproject.toml`` holds by its
``tool.pytest`` table when only pytest's configuration search opened it.

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


@hookimpl
def memotest_readers() -> list[Reader]:
    return [READER]
