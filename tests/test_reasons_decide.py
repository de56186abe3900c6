"""The reason memotest gives is that of the recorded run that decides: after a failing
edit and its revert replayed the older passing run, the next real edit is an input change
(``explain``, ``build -v``, ``list``, ``show``), not "last run failed"; ``explain -v``
lists every changed input; ``explain``/``show`` take a target written after ``--pytest``.
Real builds of a real command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable

CHECK = """
import sys
sys.exit(0 if open("code.txt").read().strip().startswith("good") else 1)
"""


def _fail_revert_edit(root: Path) -> None:
    write_tree(root, {"check.py": CHECK, "code.txt": "good\n", "other.txt": "o\n"})
    (root / "memotest.toml").write_text(f'[targets.t]\ncommand = "{PY} check.py"\n')
    assert build_statuses(root)[2] == {"t": "passed"}
    (root / "code.txt").write_text("bad\n")
    assert build_statuses(root)[2] == {"t": "failed"}
    (root / "code.txt").write_text("good\n")
    assert build_statuses(root)[2] == {"t": "cached"}  # the older pass, replayed
    (root / "code.txt").write_text("good, edited\n")


def test_after_fail_revert_edit_the_reason_is_the_replayed_runs(tmp_path):
    root = tmp_path / "p"
    _fail_revert_edit(root)
    explained = memotest("explain", "t", cwd=root).stdout.decode()
    assert f"t: would run: {root / 'code.txt'}: content changed" in explained, explained
    assert "failed" not in explained
    listed = memotest("list", cwd=root).stdout.decode()
    assert "last passed" in listed, listed
    shown = memotest("show", "t", cwd=root).stdout.decode()
    assert shown.startswith("t: passed (exit code 0)"), shown
    _code, out, statuses = build_statuses(root, "-v")
    assert statuses == {"t": "passed"}
    assert f"{root / 'code.txt'}: content changed" in out and "last run failed" not in out


def test_a_newer_fail_still_says_failed(tmp_path):
    """The run that decided last failed: that is the reason, and list and show say so."""
    root = tmp_path / "p"
    _fail_revert_edit(root)
    (root / "code.txt").write_text("bad, again\n")
    assert build_statuses(root)[2] == {"t": "failed"}
    (root / "code.txt").write_text("bad, edited\n")
    explained = memotest("explain", "t", cwd=root).stdout.decode()
    assert "t: would run: last run failed (exit code 1)" in explained, explained
    assert "last failed" in memotest("list", cwd=root).stdout.decode()


@pytest.mark.parametrize("args", [("explain", "--pytest", "tests"), ("show", "--pytest", "tests")])
def test_a_target_after_pytest_is_taken_back(tmp_path, args):
    root = tmp_path / "p"
    write_tree(root, {"tests/test_a.py": "def test_a():\n    pass\n", "Makefile": "x:\n\ttrue\n"})
    assert memotest("build", "--pytest", "tests", cwd=root).returncode == 0
    proc = memotest(*args, "pytest:tests/test_a.py", cwd=root)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "pytest:tests/test_a.py" in out and "passed" in out, out
    missing = memotest(args[0], "--pytest", "tests", cwd=root)
    assert missing.returncode == 2
    assert f"memotest {args[0]} pytest:tests/test_a.py --pytest tests" in missing.stderr.decode()


@pytest.mark.parametrize(
    "other",
    [
        {"Makefile": "test:\n\techo hi\n"},
        {"tox.ini": "[tox]\nenv_list = py\n[testenv]\ncommands = python -c pass\n"},
        {"noxfile.py": "import nox\n@nox.session\ndef tests(session):\n    pass\n"},
    ],
    ids=["Makefile", "tox.ini", "noxfile.py"],
)
def test_a_pytest_targets_record_is_found_beside_another_tools_file(tmp_path, other):
    root = tmp_path / "p"
    write_tree(root, {"tests/test_a.py": "def test_a():\n    pass\n"})
    assert memotest("build", "--pytest", "tests", cwd=root).returncode == 0
    write_tree(root, other)
    name = "pytest:tests/test_a.py"
    shown = memotest("show", name, cwd=root)
    assert shown.returncode == 0 and shown.stdout.decode().startswith(f"{name}: passed"), (
        shown.stderr.decode()
    )
    explained = memotest("explain", name, cwd=root)
    assert f"{name}: up to date" in explained.stdout.decode(), explained.stderr.decode()
    listed = memotest("list", cwd=root)
    assert name in listed.stdout.decode(), listed.stderr.decode()
    with_pytest = memotest("list", "--pytest", "tests", cwd=root)
    assert f"{name}" in with_pytest.stdout.decode(), with_pytest.stderr.decode()
