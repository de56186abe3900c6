"""A child forked from a warm worker's run looks for modules in the import system's caches
of the folders the run listed, and reports nothing of it: at a fork those folders become
whole (``memotest/worker/listings.py``, ``watch_forks``). Real pytest builds."""

from __future__ import annotations

from pathlib import Path

from conftest import build_statuses, write_tree

A = "pytest:tests/test_a.py"
#: Only the forked child looks for ``localsettings``, in the folders its parent listed.
TEST = """\
import os


def test_a():
    pid = os.fork()
    if pid == 0:
        try:
            import localsettings

            os._exit(localsettings.VALUE)
        except ImportError:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
"""


def test_a_module_only_a_forked_child_looked_for_runs_the_test_again(tmp_path: Path):
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", "tests/test_a.py": TEST})
    _, out, st = build_statuses(proj, "--pytest")
    assert st == {A: "passed"}, out
    _, out, st = build_statuses(proj, "--pytest")
    assert st == {A: "cached"}, out
    (proj / "localsettings.py").write_text("VALUE = 2\n")
    _, out, st = build_statuses(proj, "--pytest")
    assert st == {A: "failed"}, out
