"""``memotest build --pytest``: one target per test file from pytest's own collection.

Real pytest in subprocesses, real builds; the tests prove what ran with the JSON report.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, python_without_memotest, write_tree

PY = sys.executable


def build(cwd: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    return build_statuses(cwd, "-j", "2", *args)


@pytest.fixture
def proj(tmp_path):
    return write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\ntestpaths = tests\n",
            "calc/__init__.py": "",
            "calc/arith.py": "def add(a, b):\n    return a + b\n",
            "calc/text.py": "def shout(s):\n    return s.upper()\n",
            "tests/test_arith.py": """
                from calc.arith import add

                def test_add():
                    assert add(1, 2) == 3

                def test_add_neg():
                    assert add(-1, 1) == 0
            """,
            "tests/test_text.py": """
                from calc.text import shout

                def test_shout():
                    assert shout("a") == "A"
            """,
            "tests/test_plain.py": "def test_plain():\n    assert True\n",
            "helper_not_a_test.py": "X = 1\n",
            "README.md": "# calc\n",
        },
    )


ALL = ("pytest:tests/test_arith.py", "pytest:tests/test_plain.py", "pytest:tests/test_text.py")


def test_one_target_per_file_cached_then_only_the_importer_reruns(proj):
    code, out, st = build(proj, "--pytest")
    assert code == 0, out
    assert st == dict.fromkeys(ALL, "passed")
    # The collection is recorded like a target: its inputs include the test files.
    from memotest.store import Store

    with Store.open(proj, lock=False) as store:
        rec = store.get("pytest-collection:.")
        assert rec is not None and rec.cacheable, rec and rec.uncacheable_reason
        assert any(i.path.endswith("test_arith.py") for i in rec.inputs)
    code, out, st = build(proj, "--pytest")
    assert code == 0, out
    assert st == dict.fromkeys(ALL, "cached")

    (proj / "calc" / "text.py").write_text("def shout(s):\n    return s.lower()\n")
    code, out, st = build(proj, "--pytest")
    assert code == 1, out
    assert st == {
        "pytest:tests/test_arith.py": "cached",
        "pytest:tests/test_plain.py": "cached",
        "pytest:tests/test_text.py": "failed",
    }
    assert "assert 'a' == 'A'" in out  # the failing file's log is shown


def test_paths_select_files_and_targets_go_before_pytest(proj):
    code, out, st = build(proj, "--pytest", "tests/test_plain.py", "tests/test_text.py")
    assert code == 0, out
    assert st == {"pytest:tests/test_plain.py": "passed", "pytest:tests/test_text.py": "passed"}

    # From a subfolder: names stay relative to pytest's rootdir, runs happen there.
    code, out, st = build(proj / "tests", "pytest:tests/test_arith.py", "--pytest", ".")
    assert code == 0, out
    assert st == {"pytest:tests/test_arith.py": "passed"}

    # A target name after --pytest is a path that does not exist: a clear usage error.
    code, out, _ = build(proj, "--pytest", "pytest:tests/test_arith.py")
    assert code == 2
    assert "no such file or folder: 'pytest:tests/test_arith.py'" in out
    assert "before --pytest" in out


def test_a_file_pytest_cannot_collect_fails_and_the_others_run(proj):
    (proj / "tests" / "test_broken.py").write_text("import os\nimport no_such_module_xyz\n")
    code, out, st = build(proj, "--pytest")
    assert code == 1, out
    assert st == {**dict.fromkeys(ALL, "passed"), "pytest:tests/test_broken.py": "failed"}
    assert "No module named 'no_such_module_xyz'" in out  # the failed target's log


def test_a_broken_conftest_is_exit_2_and_runs_nothing(proj):
    (proj / "tests" / "conftest.py").write_text("import os\nimport no_such_module_xyz\n")
    code, out, st = build(proj, "--pytest")
    assert code == 2, out
    assert "conftest.py" in out and "No module named 'no_such_module_xyz'" in out
    assert st == {}
    assert "PASSED" not in out and "FAILED" not in out  # no target ran


def test_from_pytest_and_no_tests(tmp_path, proj):
    proc = memotest("list", "--from", "pytest", cwd=proj)
    assert proc.returncode == 0, proc.stderr.decode()
    assert all(name in proc.stdout.decode() for name in ALL)

    empty = write_tree(tmp_path / "empty", {"notes.txt": "no tests here\n"})
    code, out, _ = build(empty, "--pytest")
    assert code == 2
    assert "no tests collected" in out


def test_editing_one_test_file_or_a_root_file_reruns_only_its_own_target(proj):
    """pytest 8+ stats every entry of the folders on the way to a test file; the targets'
    pytest plugin (memotest_pytest.narrow) skips the entries pytest would throw away, so a
    sibling test file or a README is not an input of every target."""
    # A conftest that answers pytest_ignore_collect for every path (False: "collect it")
    # must not get in the way.
    (proj / "tests" / "conftest.py").write_text(
        "def pytest_ignore_collect(collection_path, config):\n    return False\n"
    )
    code, out, st = build(proj, "--pytest")
    assert code == 0, out
    (proj / "tests" / "test_plain.py").write_text("def test_plain():\n    assert 1\n")
    (proj / "README.md").write_text("# calc, with more docs\n")
    code, out, st = build(proj, "--pytest")
    assert code == 0, out
    assert st == {
        "pytest:tests/test_arith.py": "cached",
        "pytest:tests/test_plain.py": "passed",
        "pytest:tests/test_text.py": "cached",
    }
    from memotest.store import Store

    with Store.open(proj, lock=False) as store:
        rec = store.get("pytest:tests/test_arith.py")
        paths = {os.path.relpath(i.path, proj) for i in rec.inputs}
    assert "tests/test_arith.py" in paths and "calc/arith.py" in paths
    assert "tests/test_plain.py" not in paths and "helper_not_a_test.py" not in paths
    assert "README.md" not in paths
    assert "tests" in paths  # the folder's listing: a new entry on the way is still seen


def test_collection_does_not_import_test_modules_and_a_file_without_tests_passes(proj):
    # Importing this module leaves a mark, outside the project (a new entry in a folder the
    # targets list would rightly make them run again): the collection must not import it.
    marks = proj.parent / "marks"
    marks.mkdir()
    (proj / "tests" / "test_marks.py").write_text(
        f"import os\nos.close(os.open({str(marks / 'imported')!r}, os.O_CREAT | os.O_WRONLY))\n"
    )
    code, out, st = build(proj, "--pytest")
    assert code == 0, out
    assert st == {**dict.fromkeys(ALL, "passed"), "pytest:tests/test_marks.py": "passed"}
    # it was imported once: by its own target, which found no tests and passed
    assert (marks / "imported").exists()
    code, out, st = build(proj, "--pytest")
    assert st == {**dict.fromkeys(ALL, "cached"), "pytest:tests/test_marks.py": "cached"}

    from memotest.store import Store

    with Store.open(proj, lock=False) as store:
        rec = store.get("pytest-collection:.")
        read = {os.path.relpath(i.path, proj) for i in rec.inputs}
    assert "calc/arith.py" not in read  # no test module imported, so no package code read


def test_an_interpreter_without_memotest_gets_the_full_collection(tmp_path, proj):
    """--pytest-python naming an environment where memotest_pytest is not importable: the
    collection imports the modules (only files with tests become targets) and the targets
    run without the narrow plugin."""
    python = python_without_memotest(tmp_path / "venv")
    (proj / "tests" / "test_nothing.py").write_text("X = 1\n")
    code, out, st = build(proj, "--pytest", "--pytest-python", str(python))
    assert code == 0, out
    assert st == dict.fromkeys(ALL, "passed")  # test_nothing.py: no tests, no target
    from memotest_pytest.plugin import load

    commands = [t.command for t in load(proj, [], str(python)).targets.values()]
    assert commands and all("memotest_pytest.narrow" not in c for c in commands)
    commands = [t.command for t in load(proj, [], PY).targets.values()]
    assert commands and all("memotest_pytest.narrow" in c for c in commands)


def test_config_files_pytest_only_looked_into_are_not_inputs(tmp_path):
    """pytest reads pyproject.toml, tox.ini and setup.cfg looking for its section; the
    targets name the file the collection found (-c), so only that one is an input."""
    root = write_tree(
        tmp_path / "cfg",
        {
            "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n',
            "tox.ini": "[pytest]\nmarkers = slow\n",
            "setup.cfg": "[metadata]\nversion = 1\n",
            "tests/test_a.py": "def test_a():\n    assert True\n",
        },
    )
    code, out, st = build(root, "--pytest")
    assert code == 0 and st == {"pytest:tests/test_a.py": "passed"}, out
    # a version bump where pytest found no section of its own: nothing re-runs
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "2"\n')
    (root / "setup.cfg").write_text("[metadata]\nversion = 2\n")
    code, out, st = build(root, "--pytest")
    assert st == {"pytest:tests/test_a.py": "cached"}, out
    # the file pytest uses is an input
    (root / "tox.ini").write_text("[pytest]\nmarkers = slow\naddopts = -x\n")
    code, out, st = build(root, "--pytest")
    assert st == {"pytest:tests/test_a.py": "passed"}, out
    # pyproject.toml gains a pytest section: pytest would now use it, so the targets do
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "2"\n[tool.pytest.ini_options]\naddopts = "-v"\n'
    )
    code, out, st = build(root, "--pytest")
    assert st == {"pytest:tests/test_a.py": "passed"}, out
    from memotest.store import Store

    with Store.open(root, lock=False) as store:
        paths = {os.path.relpath(i.path, root) for i in store.get("pytest:tests/test_a.py").inputs}
    assert "pyproject.toml" in paths and "tox.ini" not in paths and "setup.cfg" not in paths


def test_without_a_config_file_the_targets_say_so(tmp_path):
    root = write_tree(
        tmp_path / "nocfg",
        {
            "setup.cfg": "[metadata]\nversion = 1\n",
            # pytest 8.1+ takes this as its (empty) configuration file
            "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n',
            "tests/conftest.py": "import os\nMARK = os.environ.get('X')\n",
            "tests/test_a.py": "def test_a():\n    assert True\n",
        },
    )
    code, out, st = build(root, "--pytest")
    assert code == 0 and st == {"pytest:tests/test_a.py": "passed"}, out
    (root / "setup.cfg").write_text("[metadata]\nversion = 2\n")
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "2"\n')
    code, out, st = build(root, "--pytest")
    assert st == {"pytest:tests/test_a.py": "cached"}, out
    # settings appear in it: they apply
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "2"\n[tool.pytest.ini_options]\naddopts = "-v"\n'
    )
    code, out, st = build(root, "--pytest")
    assert st == {"pytest:tests/test_a.py": "passed"}, out
    # a pytest.ini appears: the collection finds it and the target runs with it
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:doctest\n")
    code, out, st = build(root, "--pytest")
    assert st == {"pytest:tests/test_a.py": "passed"}, out


def test_a_configuration_file_below_the_collections_is_left_to_pytest(tmp_path):
    from memotest_pytest.plugin import load

    root = write_tree(
        tmp_path / "nested",
        {
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": "def test_a():\n    assert True\n",
            "tests/sub/tox.ini": "[pytest]\naddopts = -x\n",
            "tests/sub/test_b.py": "def test_b():\n    assert True\n",
        },
    )
    targets = load(root, [], PY).targets
    assert "-c" in targets["pytest:tests/test_a.py"].command
    assert "-c" not in targets["pytest:tests/sub/test_b.py"].command  # pytest finds tox.ini
    (root / "tests" / "sub" / "tox.ini").unlink()
    targets = load(root, [], PY).targets
    assert "-c" in targets["pytest:tests/sub/test_b.py"].command


def test_the_narrow_plugin_can_be_switched_off(proj):
    """MEMOTEST_PYTEST_NARROW=0: pytest collects as by itself, and probes every entry on
    the way again (a sibling test file is an input, by what is there: ``probed``); the
    switch is part of the key."""
    env = {**os.environ, "MEMOTEST_PYTEST_NARROW": "0"}
    proc = memotest("build", "--pytest", cwd=proj, env=env)
    assert proc.returncode == 0, proc.stderr
    show = memotest("show", "--paths", "--pytest", "pytest:tests/test_arith.py", cwd=proj, env=env)
    assert f"probed {proj / 'tests' / 'test_plain.py'}" in show.stdout.decode()
    (proj / "tests" / "test_plain.py").write_text("def test_plain():\n    assert 1\n")
    report = proj.parent / "narrow-off.json"
    proc = memotest("build", "--json-report", str(report), "--pytest", cwd=proj, env=env)
    assert proc.returncode == 0, proc.stderr
    st = {t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]}
    assert st["pytest:tests/test_arith.py"] == "cached"  # test_plain.py is still a file
    # the same targets: helper_not_a_test.py, which pytest makes a node for on the way to
    # tests/ and drops, is not one
    assert set(st) == set(ALL)


def test_explain_of_a_collection_that_ran_to_list_the_targets_says_so(proj):
    """``explain`` lists the targets with the collection, which runs again when it is not
    up to date: it says so, not that it was up to date."""
    proc = memotest("build", "--pytest", cwd=proj)
    assert proc.returncode == 0, proc.stderr
    name = "pytest-collection:."
    (proj / "tests" / "conftest.py").write_text("# a conftest now\n")
    out = memotest("explain", "--pytest", name, cwd=proj).stdout.decode()
    assert f"{name}: was not up to date: it ran again to list the targets" in out, out
    out = memotest("explain", "--pytest", name, cwd=proj).stdout.decode()
    assert f"{name}: up to date" in out, out
