"""Test-level attribution (``memotest/recording/parts.py``, ``memotest_pytest/attribute.py``,
``memotest/worker/code_watch.py``'s phases): real pytest builds forked from a warm worker,
and the map from each test to the code it depended on that the record names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree

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
    code, out, st = build_statuses(proj, "--pytest", "--select", "tests")
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


def test_a_build_that_selects_no_tests_maps_none(tmp_path):
    """Only a build that may select tests has its runs label each test's code (each code
    object noted again in every test costs the run; on Python 3.12+ events restarted per
    test). A later ``--select tests`` runs a stale file whole once, then selects."""
    proj = project(tmp_path)
    code, out, st = build_statuses(proj, "--pytest")
    assert code == 0 and st[T] == "passed", out
    with Store.open(proj, lock=False) as store:
        assert store.records([T])[T].parts is None, out
    edit(proj, "pkg/helpers.py", 'resource["value"] += 1', 'resource["value"] += 2 - 1')
    out, status, tests = build(proj, *SELECT)
    assert status == "passed" and ran(tests) == ["test_1", "test_2", "test_3", "test_4"], out
    edit(proj, "pkg/helpers.py", 'resource["value"] += 2 - 1', 'resource["value"] += 10 - 9')
    out, status, tests = build(proj, *SELECT)
    assert status == "passed" and ran(tests) == ["test_3", "test_4"], out


# -- selection (memotest/check/select.py): --select tests ----------------------------------------


def build(proj: Path, *args: str) -> tuple[str, str, dict[str, tuple[str, bool]]]:
    """``build --pytest ARGS`` with a JSON report: the output, the target's status, and
    each test's outcome and whether it was replayed (``cached``)."""
    report = proj.parent / "report.json"
    proc = memotest("build", "--pytest", "--json-report", str(report), *args, cwd=proj)
    out = proc.stdout.decode() + proc.stderr.decode()
    doc = json.loads(report.read_text())
    target = next(t for t in doc["targets"] if t["name"] == T)
    tests = {t["id"].rsplit("::", 1)[-1]: (t["status"], t["cached"]) for t in target["tests"]}
    return out, target["status"], tests


def edit(proj: Path, rel: str, old: str, new: str) -> None:
    path = proj / rel
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def ran(tests: dict[str, tuple[str, bool]]) -> list[str]:
    return sorted(name for name, (_, cached) in tests.items() if not cached)


SELECT = ("--select", "tests")


def test_a_function_edit_runs_the_tests_that_ran_it_and_replays_the_others(tmp_path):
    proj = project(tmp_path)
    out, status, tests = build(proj, *SELECT)
    assert status == "passed" and ran(tests) == ["test_1", "test_2", "test_3", "test_4"], out
    edit(proj, "pkg/helpers.py", 'resource["value"] += 1', 'resource["value"] += 2 - 1')
    said = memotest("explain", "--pytest", *SELECT, T, cwd=proj).stdout.decode()
    assert "would run 2 of 4 tests: test_3 (bump changed), test_4 (after test_3);" in said
    out, status, tests = build(proj, *SELECT)
    # bump ran in test_3 only; test_4 comes after it (shared state flows forward).
    assert status == "passed" and ran(tests) == ["test_3", "test_4"], out
    assert tests["test_1"] == ("passed", True) and tests["test_2"] == ("passed", True)
    assert "(2 of 4 tests run)" in out, out
    out, status, tests = build(proj, *SELECT)
    assert status == "cached" and ran(tests) == [], out  # the merged record holds
    # The fixture-closure rule, across the merged record: the session fixture ran in
    # test_1's setup (replayed last time); editing its code runs test_1 on.
    edit(proj, "pkg/helpers.py", 'return {"value": 41}', 'return {"value": 40 + 1}')
    out, status, tests = build(proj, *SELECT)
    assert status == "passed" and ran(tests) == ["test_1", "test_2", "test_3", "test_4"], out


def test_a_test_file_function_edit_runs_that_test_on(tmp_path):
    proj = project(tmp_path)
    build(proj, *SELECT)
    edit(proj, "tests/test_x.py", "helpers.only_two() == 2", "helpers.only_two() == 1 + 1")
    out, status, tests = build(proj, *SELECT)
    assert status == "passed" and ran(tests) == ["test_2", "test_3", "test_4"], out
    assert tests["test_1"] == ("passed", True)


def test_an_import_time_change_runs_the_whole_file(tmp_path):
    proj = project(tmp_path)
    build(proj, *SELECT)
    edit(proj, "pkg/helpers.py", "def only_two", "LIMIT = 3\n\n\ndef only_two")
    out, status, tests = build(proj, *SELECT)
    assert status == "passed" and ran(tests) == ["test_1", "test_2", "test_3", "test_4"], out
    assert "tests run)" not in out


def test_new_and_failed_tests_run(tmp_path):
    proj = project(tmp_path)
    build(proj, *SELECT)
    edit(proj, "tests/test_x.py", 'request.getfixturevalue("resource")["value"] == 42', "0")
    out, status, tests = build(proj, *SELECT)
    assert status == "failed" and ran(tests) == ["test_4"], out
    assert tests["test_4"] == ("failed", False)
    out, status, tests = build(proj, *SELECT)  # nothing changed: the failed test again
    assert status == "failed" and ran(tests) == ["test_4"], out
    # A new test changes the module's body: the whole file, the new test included.
    edit(proj, "tests/test_x.py", "def test_4", "def test_5():\n    pass\n\n\ndef test_4")
    out, status, tests = build(proj, *SELECT)
    assert ran(tests) == ["test_1", "test_2", "test_3", "test_4", "test_5"], out


def test_a_reparametrized_test_runs(tmp_path):
    proj = project(tmp_path)
    edit(
        proj,
        "tests/test_x.py",
        "def test_2()",
        "import pytest\n\n\n@pytest.mark.parametrize('n', [1])\ndef test_2(n)",
    )
    out, status, tests = build(proj, *SELECT)
    assert status == "passed", out
    edit(proj, "tests/test_x.py", "[1]", "[1, 2]")
    out, status, tests = build(proj, *SELECT)
    assert {"test_2[1]", "test_2[2]"} <= set(ran(tests)), out


ORDER_TESTS = """
from pkg import helpers

SEEN = []


def test_a():
    SEEN.append(helpers.only_two())


def test_b():
    assert SEEN == [2]
"""


def only_two_returns_3(tmp_path: Path, tests: str) -> tuple[str, str, dict]:
    """The test file ``tests`` built, then built again once ``only_two`` returns 3."""
    proj = project(tmp_path)
    (proj / "tests/test_x.py").write_text(tests)
    out, status, _ = build(proj, *SELECT)
    assert status == "passed", out
    edit(proj, "pkg/helpers.py", "return 2", "return 3")
    return build(proj, *SELECT)


def test_an_order_dependent_pair_runs_together(tmp_path):
    # only_two runs in test_a only; test_b's outcome depends on what test_a left.
    out, status, tests = only_two_returns_3(tmp_path, ORDER_TESTS)
    assert status == "failed" and ran(tests) == ["test_a", "test_b"], out
    assert tests["test_b"] == ("failed", False)


def test_whole_files_and_the_default_run_whole_files(tmp_path):
    proj = project(tmp_path)
    build(proj)
    edit(proj, "pkg/helpers.py", 'resource["value"] += 1', 'resource["value"] += 2 - 1')
    out, status, tests = build(proj)
    assert status == "passed" and len(ran(tests)) == 4, out
    edit(proj, "pkg/helpers.py", "+= 2 - 1", "+= 3 - 2")
    out, status, tests = build(proj, *SELECT, "--whole-files")
    assert status == "passed" and len(ran(tests)) == 4, out


SUBPROCESS_TESTS = """
import subprocess
import sys

from pkg import helpers


def test_sub():
    code = "from pkg import helpers; assert helpers.only_two() == 2"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_in():
    helpers.only_two()
"""


def test_code_another_process_ran_runs_the_whole_file(tmp_path):
    # only_two ran in test_in's part, and in test_sub's subprocess, where no map sees it.
    out, status, tests = only_two_returns_3(tmp_path, SUBPROCESS_TESTS)
    assert status == "failed" and tests["test_sub"] == ("failed", False), out


EARLIER_STATE_TESTS = """
from pkg import helpers

SEEN = []


def test_a():
    SEEN.append(1)


def test_b():
    assert helpers.only_two() + len(SEEN) == 3
"""


@pytest.mark.xfail(
    strict=True,
    reason="not closed (docs/limits.md, running part of a test file): test_a does not run, "
    "so test_b sees other state than in a whole run; why --select tests is opt-in",
)
def test_state_an_earlier_unrun_test_leaves(tmp_path):
    out, status, _ = only_two_returns_3(tmp_path, EARLIER_STATE_TESTS)
    assert status == "failed", out  # as the whole file fails: 3 + 1 != 3


def test_a_package_installed_inside_the_standard_librarys_folder_is_a_caller():
    """An interpreter outside a virtual environment (pyenv's, a CI image's) keeps its
    site-packages inside the standard library's folder: pytest's code there is what opened
    a test file (benign), not the worker's code below it (which would stop selection)."""
    from memotest.worker import code_watch

    std = code_watch.STDLIB[0]

    def frame_in(filename: str):
        space: dict = {}
        exec(compile("import sys\ndef f():\n    return sys._getframe()\n", filename, "exec"), space)
        return space["f"]()

    pytest_file = std + "site-packages/_pytest/assertion/rewrite.py"
    assert code_watch.caller(frame_in(pytest_file)) == pytest_file
    assert code_watch.caller(frame_in(std + "pathlib.py")) == __file__  # its caller: here
