"""Readers as data (``memotest/inputs/readers.py``): adding one is one file.

The reader here, ``setup.cfg``'s ``[tool:pytest]`` section as pytest's configuration
search reads it, is one plugin module written into the test's folder and loaded with
``MEMOTEST_PLUGINS``: no other module knows it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import build_statuses, memotest, write_tree

from memotest.inputs import readers
from memotest.load import plugins
from memotest.model import Kind
from memotest.store import Store

PLUGIN = "setupcfg_reader"
PLUGIN_SOURCE = '''
"""A reader: ``setup.cfg`` by its ``[tool:pytest]`` section, when only pytest's
configuration search opened it."""

import configparser
import json

from memotest.hookspecs import hookimpl
from memotest.inputs.readers import UNPARSED, Caller, Reader, part_digest

NAME = "tool:pytest"


def section_digest(data, path):
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(data.decode("utf-8"))
    except (UnicodeDecodeError, configparser.Error):
        return UNPARSED
    section = dict(parser[NAME]) if parser.has_section(NAME) else {}
    return part_digest(NAME, json.dumps(section, sort_keys=True).encode())


@hookimpl
def memotest_readers():
    return [
        Reader(
            name=NAME,
            match="setup.cfg",
            callers=(Caller(files=("/_pytest/config/findpaths.py",)),),
            digest=section_digest,
            holds_by="its [tool:pytest] section",
            unparsed="no longer parses as an INI file",
        )
    ]
'''

SETUP_CFG = """\
[metadata]
name = demo
version = 1.0

[tool:pytest]
addopts = -q
"""

A = "pytest:tests/test_a.py"
B = "pytest:tests/test_b.py"


def plugin_folder(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "plugin", {f"{PLUGIN}.py": PLUGIN_SOURCE})


@pytest.fixture
def registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The plugin, registered with this process's plugin manager for the test."""
    monkeypatch.syspath_prepend(str(plugin_folder(tmp_path)))
    module = importlib.import_module(PLUGIN)
    pm = plugins.manager()
    pm.register(module, name=PLUGIN)
    try:
        yield module
    finally:
        pm.unregister(module)
        sys.modules.pop(PLUGIN, None)


def test_the_reader_holds_by_its_section(registered: ModuleType) -> None:
    digest = registered.section_digest
    base = digest(SETUP_CFG.encode(), "/p/setup.cfg")
    assert base.startswith("tool:pytest:")
    assert digest(SETUP_CFG.replace("1.0", "2.0").encode(), "/p/setup.cfg") == base
    assert digest(SETUP_CFG.replace("-q", "-v").encode(), "/p/setup.cfg") != base
    assert digest(b"[tool:pytest\n", "/p/setup.cfg") == readers.UNPARSED
    assert readers.digest_of("/p/setup.cfg", SETUP_CFG.encode()) == base


def test_a_path_s_reader_is_the_first_whose_pattern_fits(registered: ModuleType) -> None:
    found = readers.reader_for("/p/setup.cfg")
    assert found is not None and found.name == "tool:pytest"
    assert found in readers.registered()
    assert readers.reader_for("/p/sub/pyproject.toml").name == "tool.pytest"  # type: ignore[union-attr]
    assert readers.reader_for("/p/codec-x.json.gz").name == "gzip"  # type: ignore[union-attr]
    assert readers.reader_for("/p/x.dist-info/entry_points.txt").name == "entry-points"  # type: ignore[union-attr]
    assert readers.reader_for("/p/setup.cfg.orig") is None
    assert readers.reader_for("/p/x.txt") is None


def test_the_reader_is_gone_with_its_plugin(tmp_path: Path) -> None:
    assert readers.reader_for("/p/setup.cfg") is None
    assert all(r["name"] != "tool:pytest" for r in readers.worker_table())


def test_the_worker_gets_the_readers_that_have_callers(registered: ModuleType) -> None:
    table = readers.worker_table()
    by_name = {r["name"]: r for r in table}
    assert by_name["tool:pytest"] == {
        "name": "tool:pytest",
        "match": "setup.cfg",
        "callers": [
            {
                "files": ["/_pytest/config/findpaths.py"],
                "function": None,
                "called_from": None,
                "depth": 8,
            }
        ],
    }
    assert by_name["gzip"]["callers"] == [
        {"files": ["/gzip.py"], "function": "__init__", "called_from": None, "depth": 1}
    ]
    # Readers without callers hold their files whoever read them: the worker needs none.
    assert all(r.callers for r in readers.registered() if r.name in by_name)
    assert all(r["callers"] for r in table)


def kind(proj: Path, target: str, rel: str) -> str:
    path = str(proj / rel)
    with Store.open(proj, lock=False) as store:
        record = store.records([target])[target]
        (found,) = [Kind(i.kind).value for i in record.inputs if i.path == path]
        return found


def test_a_reader_added_by_one_plugin_module(tmp_path: Path) -> None:
    """End to end: a ``--pytest`` build holds ``setup.cfg`` by its ``[tool:pytest]``
    section once the plugin module is loaded, and by nothing else."""
    proj = write_tree(
        tmp_path / "proj",
        {
            "setup.cfg": SETUP_CFG,
            "tests/test_a.py": "def test_a():\n    pass\n",
            "tests/test_b.py": "def test_b():\n    pass\n",
        },
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(plugin_folder(tmp_path)),
        "MEMOTEST_PLUGINS": PLUGIN,
    }

    def built() -> dict[str, str]:
        code, out, statuses = build_statuses(proj, "--pytest", env=env)
        assert code == 0, out
        return statuses

    assert built() == {A: "passed", B: "passed"}
    assert kind(proj, A, "setup.cfg") == "section"
    cfg = proj / "setup.cfg"
    cfg.write_text(SETUP_CFG.replace("version = 1.0", "version = 1.1"))
    assert built() == {A: "cached", B: "cached"}
    cfg.write_text(cfg.read_text().replace("addopts = -q", "addopts = -q -p no:doctest"))
    explain = memotest("explain", A, cwd=proj, env=env).stdout.decode()
    assert "setup.cfg: its [tool:pytest] section changed" in explain, explain
    assert built() == {A: "passed", B: "passed"}
