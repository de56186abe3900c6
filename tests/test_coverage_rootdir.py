"""``pytest --cov=...`` on a real pytest-cov, as a plain pytest target: it replays at its
second build, and the attacks on the two rules that make it so still run again.

What run 2 of a fresh tree found (docs/limits.md, "A run's own leftovers", ``--cov=.``):
``.coverage: appeared`` (coverage's data-file erase unlinks it: ENOENT in run 1, held as
absent; now "absent or not a directory", ``memotest_walk``'s scope) and ``directory
gained entries: .coverage`` (coverage lists the root to find the files no test executed,
``find_python_files``: a whole listing; now what that walk uses, ``coverage_side.py``).
The attacks: a new module, a new package (by names no import takes: only coverage's
walk sees them), a folder that becomes a package are in coverage's report; a folder
where the data file was makes coverage's erase raise.
"""

from __future__ import annotations

import sys

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable


def test_coverage_of_the_rootdir_settles_and_still_sees_what_it_reports(tmp_path):
    """Run 2 replays: the data file is held as its erase saw it, and the root by what
    coverage's walk uses (``memotest_pytest/coverage_side.py``). pytest-benchmark's
    ``.benchmarks``, a new folder at the root where it is loaded, would be walked too:
    left out here (docs/limits.md)."""
    pytest.importorskip("pytest_cov")
    command = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark"]
    command += ["--cov=.", "tests"]
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = {command!r}\n",
            "tests/test_a.py": "from shapes import area\n\n\ndef test_area():\n"
            "    assert area(2) == 4\n",
            "tests/shapes.py": "def area(n):\n    return n * n\n",
            "docs/conf.py": "X = 1\n",  # no __init__.py: coverage does not go further
        },
    )
    assert build_statuses(root)[2] == {"t": "passed"}
    _code, out, got = build_statuses(root, "-v")  # its own leftovers: replays
    assert got == {"t": "cached"}, out
    # a new module at the root, which no import could find (``.pyw``): coverage reports it
    write_tree(root, {"tool.pyw": "Y = 2\n"})
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "passed"} and "tool.pyw" in out, out
    assert "tool.pyw" in memotest("show", "--log", "t", cwd=root).stdout.decode()
    # a new package at the root, by a name no import takes (a dot): coverage reports it
    write_tree(root, {"v1.0/__init__.py": "", "v1.0/mod.py": "X = 1\n"})
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "passed"} and "v1.0" in out, out
    log = memotest("show", "--log", "t", cwd=root).stdout.decode()
    assert "v1.0/mod.py" in log, log
    # a folder that becomes a package: coverage goes into it now (its __init__.py)
    write_tree(root, {"docs/__init__.py": ""})
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "passed"} and "__init__.py" in out, out
    assert "docs/conf.py" in memotest("show", "--log", "t", cwd=root).stdout.decode()


def test_the_data_file_its_run_left_replays_and_a_folder_there_runs_again(tmp_path):
    """coverage's erase removes its data file with ``file_be_gone``, which drops ENOENT:
    run 1 (nothing there) and run 2 (the file run 1 left) end the same, so run 2 replays
    (``memotest_walk``'s ``pytest_load_initial_conftests``: the shim's ``memotest_shim_
    gone``, absent or not a directory); a folder there makes the erase raise."""
    pytest.importorskip("pytest_cov")
    command = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--cov=pkg", "tests"]
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = {command!r}\n",
            "tests/test_a.py": "from pkg.shapes import area\n\n\ndef test_area():\n"
            "    assert area(2) == 4\n",
            "pkg/__init__.py": "",
            "pkg/shapes.py": "def area(n):\n    return n * n\n",
        },
    )
    assert build_statuses(root)[2] == {"t": "passed"}
    assert (root / ".coverage").is_file()
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "cached"}, out
    (root / ".coverage").unlink()
    (root / ".coverage").mkdir()
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "failed"} and "is now a directory" in out, out
