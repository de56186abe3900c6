"""Item 4 of issue 25 on real tox and real pytest: what a changelog behind a symlink and
coverage's leftovers cost a tox env.

* A ``CHANGES.md`` that is a symlink (to ``docs/CHANGES.md``): pytest's ``scandir`` asks
  every entry of the rootdir ``is_file()`` (to drop broken links), which for a symlink is a
  ``stat`` through the link, held by the target's content: an edit of the changelog re-runs
  the env. The answer pytest used is yes or no; holding it so is helper ``order``'s
  "untimed probe" scope (the strict xfail below names it: it passes once that lands).
  The attack on that narrowing: a program that acts on the answer (the link now broken)
  still runs again.
* ``pytest --cov=.``: coverage erases and re-creates ``.coverage`` (an ``unlink`` that
  succeeds once the leftover is there: held as "absent or not a directory", which the
  leftover is) and walks the rootdir (held by what the walk uses: ``.py``/``.pyw`` files
  and folders, ``memotest_pytest/coverage_side.py``): run 2 replays.
"""

from __future__ import annotations

import os

import pytest
from test_tox import PAD, count, env_project, environ, pytestmark, tox, write  # noqa: F401

SITE = os.path.dirname(os.path.dirname(pytest.__file__))
SETTING = "\n".join(
    ["set_env =", f"{PAD}PYTHONPATH={SITE}", f"{PAD}PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
)
TEST = """
    from shapes import area

    def test_area():
        assert area(2) == 4
    """


def linked_changelog(tmp_path, command: str):
    counter = tmp_path / "counter"
    files = {
        "tests/test_a.py": TEST,
        "tests/shapes.py": "def area(n):\n    return n * n\n",
        "docs/CHANGES.md": "## 1.0\n",
    }
    root = env_project(tmp_path, counter, command, files, SETTING)
    (root / "CHANGES.md").symlink_to("docs/CHANGES.md")
    return root, counter


@pytest.mark.xfail(
    strict=True,
    reason="pytest's scandir() asks a symlink is_file(): a stat through the link, held by "
    "the target's content; a yes/no probe (helper order's untimed-probe scope)",
)
def test_an_edit_of_a_symlinked_changelog_replays(tmp_path):
    root, counter = linked_changelog(tmp_path, "python -m pytest -q -p no:cacheprovider tests")
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1 and "memotest: cached, replayed" in out, out
    with (root / "docs" / "CHANGES.md").open("a") as f:
        f.write("- more\n")
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1 and "memotest: cached, replayed" in out, out


def test_a_program_that_acts_on_a_symlinks_is_file_runs_again_when_it_breaks(tmp_path):
    """The attack on holding ``is_file()`` as a yes/no answer: the answer changes (the link
    is broken now) and the program prints it, so the env runs again."""
    probe = "python -c \"import pathlib; print('is_file', pathlib.Path('CHANGES.md').is_file())\""
    root, counter = linked_changelog(tmp_path, probe)
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1 and "is_file True" in out, out
    (root / "docs" / "CHANGES.md").unlink()
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 2 and "is_file False" in out, out


def test_coverage_of_the_rootdir_settles_at_run_2(tmp_path):
    pytest.importorskip("pytest_cov")
    cmd = "python -m pytest -q -p no:cacheprovider -p pytest_cov --cov=. tests"
    root, counter = linked_changelog(tmp_path, cmd)
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1 and "shapes.py" in out, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1 and "memotest: cached, replayed" in out, out


# A command that takes a lock by making a folder (or a file with O_EXCL) and fails when it
# is taken: the success of its ``mkdir`` is what it saw (the path was absent), and where the
# folder is there now a run must fail. The shim records such a creation's success as a
# lookup that missed (``M``) before its ``N`` (docs/limits.md).
LOCKS = {
    "mkdir": "import os; os.mkdir('lock-mkdir'); print('took the lock')",
    "o_excl": "open('lock-o_excl', 'x').close(); print('took the lock')",
}


def test_a_lock_taken_by_an_exclusive_create_runs_again_where_it_is_held(tmp_path):
    """One env per kind of lock (each its own lock and counter, one tox run for both)."""
    counters = {kind: tmp_path / f"counter-{kind}" for kind in LOCKS}
    ini = [f"[tox]\nenv_list = {', '.join(LOCKS)}\n[testenv]\nskip_install = true\n"]
    for kind, lock in LOCKS.items():
        bump = f"python -c \"open(r'{counters[kind]}', 'a').write('x')\""
        ini.append(f'[testenv:{kind}]\ncommands =\n    {bump}\n    python -c "{lock}"\n')
    root = write(tmp_path / "proj", {"tox.ini": "".join(ini)})
    code, out = tox(root)
    assert code == 0 and out.splitlines().count("took the lock") == len(LOCKS), out
    assert {kind: count(c) for kind, c in counters.items()} == dict.fromkeys(LOCKS, 1), out
    code, out = tox(root)  # each lock is held now: each env runs, and fails
    assert code != 0, out
    assert {kind: count(c) for kind, c in counters.items()} == dict.fromkeys(LOCKS, 2), out
    assert out.count("FileExistsError") == len(LOCKS), out
