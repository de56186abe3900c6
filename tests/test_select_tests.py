"""Test-level attribution (``memotest/parts.py``, ``memotest_pytest/attribute.py``,
``memotest/worker/code_watch.py``'s phases): real pytest builds forked from a warm worker,
and the map from each test to the code it depended on that the record names."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import build_statuses, write_tree

from memotest.store import Store

T = "pytest:tests/test_x.py"

HELPERS = """
def make_resource():
    return {"value": 41}


def bump(resource):
    resource["value"] += 1
    return resource["value"]


def only_two():
    return 2


def at_teardown():
    return None
"""

CONFTEST = """
import pytest
from pkg import helpers


@pytest.fixture(scope="session")
def resource():
    yield helpers.make_resource()
    helpers.at_teardown()
"""

TESTS = """
from pkg import helpers


def test_1(resource):
    assert resource["value"] == 41


def test_2():
    assert helpers.only_two() == 2


def test_3(resource):
    assert helpers.bump(resource) == 42


def test_4(request):
    assert request.getfixturevalue("resource")["value"] == 42
"""


def project(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "pkg/__init__.py": "",
            "pkg/helpers.py": HELPERS,
            "tests/conftest.py": CONFTEST,
            "tests/test_x.py": TESTS,
        },
    )


def parts(proj: Path) -> dict:
    with Store.open(proj, lock=False) as store:
        rec = store.records([T])[T]
        assert rec.parts, "the record names no map of its tests"
        return json.loads(store.read_blob(rec.parts))


def names(blob: dict, label: str, rel: str, proj: Path) -> set[str]:
    keys = blob["parts"][label].get(str(proj / rel), [])
    return {k.rsplit("#", 1)[0] for k in keys}


def test_each_test_is_mapped_to_the_code_it_and_its_fixtures_ran(tmp_path):
    proj = project(tmp_path)
    code, out, st = build_statuses(proj, "--pytest")
    assert code == 0 and st[T] == "passed", out
    blob = parts(proj)
    tests = [f"t:tests/test_x.py::test_{i}" for i in range(1, 5)]
    assert blob["order"] == tests
    helpers = "pkg/helpers.py"
    # The session fixture ran once, in test_1's setup; test_3 uses it from its closure,
    # test_4 by name while it ran: both depend on its code, test_2 does not.
    for label in (tests[0], tests[2], tests[3]):
        assert {"make_resource", "at_teardown"} <= names(blob, label, helpers, proj), label
        assert "resource" in names(blob, label, "tests/conftest.py", proj), label
    assert names(blob, tests[1], helpers, proj) == {"only_two"}
    assert names(blob, tests[2], helpers, proj) >= {"bump"}
    assert "bump" not in names(blob, tests[0], helpers, proj)
    # The test file's own functions, each its test's; module bodies ran at import.
    assert names(blob, tests[1], "tests/test_x.py", proj) == {"test_2"}
    assert "<module>" in {k.rsplit("#", 1)[0] for k in blob["global"][str(proj / helpers)]}
    assert not blob["unmapped"]
    assert str(proj / "tests/test_x.py") in blob["trees"]
