"""``pytest --cov=.`` on a real pytest-cov, as a plain pytest target: what its second and
third builds observe, and the attacks any narrowing of it must keep re-running.

What run 2 of a fresh tree finds (``memotest explain -v``; docs/limits.md, "A run's own
leftovers", ``--cov=.``): ``.coverage: appeared`` (coverage's data-file erase unlinks it:
ENOENT in run 1, held as absent) and ``directory gained entries: .benchmarks, .coverage``
(coverage lists the root to find the files no test executed, ``find_python_files``: a
whole listing). So the target settles at run 3. The attacks: a new package at the root is
in coverage's report (the listing matters); a folder where the data file was makes
coverage's erase raise (the unlink's answer matters where it is not "gone").
"""

from __future__ import annotations

import sys

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable


def test_coverage_of_the_rootdir_settles_and_still_sees_what_it_reports(tmp_path):
    pytest.importorskip("pytest_cov")
    command = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--cov=.", "tests"]
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = {command!r}\n",
            "tests/test_a.py": "from shapes import area\n\n\ndef test_area():\n"
            "    assert area(2) == 4\n",
            "tests/shapes.py": "def area(n):\n    return n * n\n",
        },
    )
    assert build_statuses(root)[2] == {"t": "passed"}
    _code, out, got = build_statuses(root, "-v")  # its own leftovers: run 2 runs
    assert got == {"t": "passed"} and ".coverage" in out, out
    assert build_statuses(root)[2] == {"t": "cached"}
    # a new package at the root: coverage reports it (the root listing is an input)
    write_tree(root, {"extra/__init__.py": "", "extra/mod.py": "X = 1\n"})
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "passed"} and "extra" in out, out
    log = memotest("show", "--log", "t", cwd=root).stdout.decode()
    assert "extra/mod.py" in log, log
    # a folder where the data file was: coverage's erase raises (only ENOENT is dropped)
    (root / ".coverage").unlink()
    (root / ".coverage").mkdir()
    _code, out, got = build_statuses(root, "-v")
    assert got != {"t": "cached"}, out


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
