"""``memotest build --pytest``: the targets' configured worker started while the collection
runs (``memotest_pytest/early.py``), from a guess of what the collection will find.

The list the build acts on is the new collection's whatever the guess: a conftest that
ignores a file (and the folder the guess took), a file that no longer holds tests, a new
test file and a collection that fails each end as they did when the worker was started
after the collection. Real pytest, real workers, under the real shim.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree

EARLY = "a warm worker was started before its runs were listed"
PROMOTED = "a warm worker whose runs ended was prepared for others"

CONFTEST = """
import pytest

import helper


@pytest.fixture
def level():
    return helper.LEVEL
"""


def test_early_worker_and_what_the_collection_decides(tmp_path: Path) -> None:
    # No entry-point plugin (each configuration is cheaper): one that creates a folder
    # when pytest is configured (pytest-benchmark's .benchmarks/) has the first build's
    # collection run again in the second, early worker or not.
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "helper.py": "LEVEL = 1\n",
            "tests/conftest.py": CONFTEST,
            "tests/test_a.py": "def test_a(level):\n    assert level == 1\n",
            "tests/test_b.py": "def test_b(level):\n    assert level == 1\n",
        },
    )
    a, b, c = "pytest:tests/test_a.py", "pytest:tests/test_b.py", "pytest:tests/test_c.py"
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert (rc, st) == (0, {a: "passed", b: "passed"}), out
    # The runs forked from the worker started early: the collection's was not promoted.
    assert EARLY in out and PROMOTED not in out, out
    # The collection's record, finished by the build once the targets started: replayed.
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert (rc, st) == (0, {a: "cached", b: "cached"}) and EARLY not in out, out

    # A conftest that ignores a folder, the one holding the first test file: the guess
    # takes that folder (a conftest of its own: the worker of its files is its own), whose
    # worker no target uses (the collection's worker is promoted for them); the ignored
    # file is no target. The conftest changed: both run again.
    (proj / "tests/aa").mkdir()
    (proj / "tests/aa/test_0.py").write_text("def test_0():\n    assert False\n")
    (proj / "tests/aa/conftest.py").write_text("")
    conftest = proj / "tests/conftest.py"
    conftest.write_text(CONFTEST + 'collect_ignore = ["aa"]\n')
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert (rc, st) == (0, {a: "passed", b: "passed"}), out
    assert EARLY in out and PROMOTED in out, out

    # A file that no longer holds a test, a new test file (the list is the new
    # collection's; a file without tests passes, as before), and a change to what the
    # early worker configured with (the conftest's import): every run forked from it
    # depends on it, as on a worker started after the collection (test_a runs again).
    (proj / "tests/aa/test_0.py").unlink()  # the guess: tests/ again
    (proj / "tests/aa/conftest.py").unlink()
    (proj / "tests/test_b.py").write_text("VALUE = 2\n")
    (proj / "tests/test_c.py").write_text("def test_c(level):\n    assert level == 2\n")
    (proj / "helper.py").write_text("LEVEL = 2\n")
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert (rc, st) == (1, {a: "failed", b: "passed", c: "passed"}), out
    assert EARLY in out and PROMOTED not in out, out

    # A collection that fails: a usage error, no target, and the build ends.
    conftest.write_text(CONFTEST + "collect_ignore = [\n")
    rc, out, st = build_statuses(proj, "-j1", "--pytest", "tests", env=env)
    assert rc == 2 and st == {} and "conftest" in out, out


def collection_variants(proj: Path, env: dict) -> str:
    proc = memotest("show", "--pytest", "tests", "pytest-collection:tests", cwd=proj, env=env)
    out = proc.stdout.decode() + proc.stderr.decode()
    line = [x for x in out.splitlines() if "recorded runs (variants)" in x]
    return line[0].rsplit(":", 1)[1].split(";")[0].strip() if line else out


def test_the_benchmarks_folder_the_collection_made_replays_a_file_there_does_not(
    tmp_path: Path, host_pytest_plugins: None
) -> None:
    # pytest-benchmark makes .benchmarks/ when pytest is configured, in the first build's
    # collection itself; the second build replays that collection (no pytest starts).
    pytest.importorskip("pytest_benchmark")
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # pytest-benchmark alone
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\naddopts = -p pytest_benchmark.plugin\n",
            "tests/test_a.py": "def test_a():\n    assert True\n",
        },
    )
    a, b = "pytest:tests/test_a.py", "pytest:tests/test_b.py"
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert (rc, st) == (0, {a: "passed"}) and (proj / ".benchmarks").is_dir(), out
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert (rc, st) == (0, {a: "cached"}) and EARLY not in out, out
    assert collection_variants(proj, env) == "1"
    # The attack: a file where pytest-benchmark's storage folder goes (its mkdir fails,
    # and it drops that): not what the record saw, the collection runs again. Two rules
    # hold it: the absence "or a directory" (absent.py's OR_DIR) and the collection's
    # effects (run_memoized: what it made is no longer there); each alone re-collects.
    (proj / ".benchmarks").rmdir()
    (proj / ".benchmarks").write_text("")
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert collection_variants(proj, env) == "2", out
    # A new test file still collects again, and is a target.
    (proj / ".benchmarks").unlink()
    (proj / "tests/test_b.py").write_text("def test_b():\n    assert True\n")
    rc, out, st = build_statuses(proj, "-j1", "-v", "--pytest", "tests", env=env)
    assert rc == 0 and st.get(b) == "passed", out
