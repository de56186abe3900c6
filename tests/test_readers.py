"""Readers as data (``memotest/inputs/readers.py``): adding one is one file.

The reader here, a project's ``settings.ini`` by its ``[app]`` section as the project's
own ``cfgload.load()`` reads it, is one plugin module written into the test's folder and
loaded with ``MEMOTEST_PLUGINS``: no other module knows it.
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

PLUGIN = "settings_reader"
PLUGIN_SOURCE = '''
"""A reader: ``settings.ini`` by its ``[app]`` section, when only the project's
``cfgload.load()`` opened it."""

import configparser
import json

from memotest.hookspecs import hookimpl
from memotest.inputs.readers import UNPARSED, Caller, Reader, part_digest

NAME = "app"


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
            match="settings.ini",
            callers=(Caller(files=("/cfgload.py",), function="load"),),
            digest=section_digest,
            holds_by="its [app] section",
            unparsed="no longer parses as an INI file",
        )
    ]
'''

SETTINGS = """\
[metadata]
version = 1.0

[app]
mode = fast
"""
#: The project's own reader of ``settings.ini``, the reader's caller.
CFGLOAD = """\
import configparser


def load():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read("settings.ini")
    return dict(parser["app"])
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
    base = digest(SETTINGS.encode(), "/p/settings.ini")
    assert base.startswith("app:")
    assert digest(SETTINGS.replace("1.0", "2.0").encode(), "/p/settings.ini") == base
    assert digest(SETTINGS.replace("fast", "slow").encode(), "/p/settings.ini") != base
    assert digest(b"[app\n", "/p/settings.ini") == readers.UNPARSED
    assert readers.digest_of("/p/settings.ini", SETTINGS.encode()) == base


def test_a_path_s_reader_is_the_first_whose_pattern_fits(registered: ModuleType) -> None:
    found = readers.reader_for("/p/settings.ini")
    assert found is not None and found.name == "app"
    assert found in readers.registered()
    assert readers.reader_for("/p/sub/pyproject.toml").name == "tool.pytest"  # type: ignore[union-attr]
    assert readers.reader_for("/p/codec-x.json.gz").name == "gzip"  # type: ignore[union-attr]
    assert readers.reader_for("/p/x.dist-info/entry_points.txt").name == "entry-points"  # type: ignore[union-attr]
    assert readers.reader_for("/p/setup.cfg").name == "pytest-setup-cfg"  # type: ignore[union-attr]
    assert readers.reader_for("/p/settings.ini.orig") is None
    assert readers.reader_for("/p/x.txt") is None


def test_the_reader_is_gone_with_its_plugin(tmp_path: Path) -> None:
    assert readers.reader_for("/p/settings.ini") is None
    assert all(r["name"] != "app" for r in readers.worker_table())


def test_the_worker_gets_the_readers_that_have_callers(registered: ModuleType) -> None:
    table = readers.worker_table()
    by_name = {r["name"]: r for r in table}
    assert by_name["app"] == {
        "name": "app",
        "match": "settings.ini",
        "callers": [
            {
                "files": ["/cfgload.py"],
                "function": "load",
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
    """End to end: a ``--pytest`` build holds ``settings.ini`` by its ``[app]`` section
    once the plugin module is loaded, and by nothing else."""
    proj = write_tree(
        tmp_path / "proj",
        {
            "settings.ini": SETTINGS,
            "tests/cfgload.py": CFGLOAD,
            "tests/test_a.py": "from cfgload import load\n\ndef test_a():\n    assert load()\n",
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
    assert kind(proj, A, "settings.ini") == "section"
    cfg = proj / "settings.ini"
    cfg.write_text(SETTINGS.replace("version = 1.0", "version = 1.1"))
    assert built() == {A: "cached", B: "cached"}
    cfg.write_text(cfg.read_text().replace("mode = fast", "mode = fast\nlevel = 2"))
    explain = memotest("explain", A, cwd=proj, env=env).stdout.decode()
    assert "settings.ini: its [app] section changed" in explain, explain
    assert built() == {A: "passed", B: "cached"}
