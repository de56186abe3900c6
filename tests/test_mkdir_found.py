"""An exist_ok ``mkdir`` that finds its folder already there (EEXIST on a directory of the
permission bits it would have made it with: the shim's ``Z``) ends as where nothing was:
held as "absent, or a directory of those bits", and the tree's later lookups of the path
are what that call left, dropped. So a record made where the folder was there (a previous
run's ``.benchmarks``) replays in a fresh checkout. Its listing, the files under it, a
lookup before the call, a file, a symbolic link, other bits there, stay what they were;
a ``rmdir`` or ``rename`` onto it that failed on its entries lists it (the shim's ``L``).
Real builds under the real shim (``docs/limits.md``, "A folder an exist_ok mkdir found").
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from conftest import build_statuses, python_without_memotest, write_tree
from test_own_leftovers import hazards, overlapping

PY = sys.executable
# What the warm worker and the pytest processes memotest watches do before the tests.
INSTALL = "from memotest.worker import untimed; assert untimed.install(); import os, pathlib; "
MAKE = "os.makedirs('work/d', exist_ok=True); "


def project(tmp_path, code: str, files: dict[str, str] | None = None):
    # ``work``: a folder nobody lists (``python -c`` lists the current one)
    return write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = [{PY!r}, '-c', {INSTALL + code!r}]\n",
            "work/keep": "",
            **(files or {}),
        },
    )


def build(root, *args: str) -> tuple[str, dict[str, str]]:
    _code, out, got = build_statuses(root, "-v", *args)
    return out, got


USES = {
    # its listing: an input as before
    "lists": MAKE + "print(sorted(os.listdir('work/d')))",
    # a file under it: an input as before
    "reads": MAKE + "print(open('work/d/x').read() if os.path.exists('work/d/x') else 0)",
}


@pytest.mark.parametrize("use", sorted(USES))
def test_what_the_run_saw_in_the_folder_it_found_runs_again_where_it_is_gone(tmp_path, use):
    """A fresh checkout without the folder: what the run listed or read in it is not
    there, and the run says so."""
    root = project(tmp_path, USES[use], {"work/d/x": "seen"})
    out, got = build(root)
    assert got == {"t": "passed"}, out
    out, got = build(root)
    assert got == {"t": "cached"}, out
    shutil.rmtree(root / "work/d")
    out, got = build(root)
    assert got == {"t": "passed"}, out


# makedirs raises on a file; the record made with a real folder holds no symbolic link
OTHER_THINGS = {
    "file": lambda d: d.write_text("a file: makedirs raises"),
    "link-to-folder": lambda d: (d.parent / "elsewhere").mkdir() or d.symlink_to("elsewhere"),
}


@pytest.mark.parametrize("thing", sorted(OTHER_THINGS))
def test_anything_but_a_folder_where_the_folder_was_found_runs_again(tmp_path, thing):
    root = project(tmp_path, MAKE + "print('made or found')", {"work/d/.keep": ""})
    (root / "work/d/.keep").unlink()
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/d").rmdir()
    OTHER_THINGS[thing](root / "work/d")
    out, got = build(root)
    assert got != {"t": "cached"}, out


def test_a_symbolic_link_to_a_folder_is_found_as_before(tmp_path):
    """makedirs follows a link to a folder (no ``Z``: a lookup that found it, as before):
    the record holds the link, and where it is gone the run runs again."""
    root = project(tmp_path, MAKE + "print('found')", {"work/elsewhere/.keep": ""})
    (root / "work/d").symlink_to("elsewhere")
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/d").unlink()
    out, got = build(root)
    assert got == {"t": "passed"}, out


def test_what_the_run_saw_of_the_folder_besides_it_being_one_runs_again(tmp_path):
    """Only the lookups after the call are implied, and only as a folder of the bits it
    makes: a lookup before it saw whether it was there; a later ``stat`` sees its mode."""
    # before the call: whether it was there
    root = project(tmp_path, "was = os.path.isdir('work/d'); " + MAKE + "print(was)")
    (root / "work/d").mkdir()
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/d").rmdir()
    out, got = build(root)
    assert got == {"t": "passed"}, out
    # after the call: its mode, the one a made folder gets, then another
    shutil.rmtree(tmp_path / "proj")
    mode = "print(oct(os.stat('work/d').st_mode))"
    root = project(tmp_path, MAKE + mode)
    (root / "work/d").mkdir()
    out, got = build(root)
    assert got == {"t": "passed"}, out
    out, got = build(root)
    assert got == {"t": "cached"}, out
    os.chmod(root / "work/d", 0o700)
    out, got = build(root)
    assert got == {"t": "passed"}, out
    # recorded only where it had bits a made folder does not get (no ``Z``: found, as
    # before): where it is gone, it runs
    shutil.rmtree(tmp_path / "proj")
    root = project(tmp_path, MAKE + mode)
    (root / "work/d").mkdir(mode=0o700)
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/d").rmdir()
    out, got = build(root)
    assert got == {"t": "passed"}, out


def test_a_stat_of_the_folder_found_with_entries_runs_again_where_it_is_gone(tmp_path):
    """A ``stat`` hands the folder's link count and size, which its entries move: implied
    where the folder found was empty (as a made one), held where it had entries."""
    root = project(tmp_path, MAKE + "print(os.stat('work/d').st_nlink)")
    (root / "work/d/sub").mkdir(parents=True)  # a link count of 3; a made folder's is 2
    out, got = build(root)
    assert got == {"t": "passed"}, out
    shutil.rmtree(root / "work/d")
    out, got = build(root)
    assert got == {"t": "passed"}, out


# After the call the folder is there either way, but not as it was: one the call made
# is empty. A removal or a rename onto it that fails only where it holds entries saw them.
EMPTY_OR_NOT = {
    "rmdir": "os.rmdir('work/d')",
    "rename-onto": "os.makedirs('work/e', exist_ok=True); os.rename('work/e', 'work/d')",
}


@pytest.mark.parametrize("how", sorted(EMPTY_OR_NOT))
def test_a_call_that_saw_whether_the_folder_found_was_empty_runs_again(tmp_path, how):
    # passes where the folder holds entries (the call fails), fails where it is empty
    code = MAKE.rstrip("; ") + f"\ntry:\n    {EMPTY_OR_NOT[how]}\nexcept OSError:\n    pass\n"
    root = project(tmp_path, code + "else:\n    raise SystemExit('empty')", {"work/d/x": "x"})
    out, got = build(root)
    assert got == {"t": "passed"}, out
    out, got = build(root)
    assert got == {"t": "cached"}, out
    shutil.rmtree(root / "work/d")  # the fresh checkout: the call makes it, empty
    out, got = build(root)
    assert got == {"t": "failed"}, out


FINDS = {
    "makedirs": MAKE,
    "path_mkdir": "pathlib.Path('work/d').mkdir(parents=True, exist_ok=True); ",
}


@pytest.mark.parametrize("how", sorted(FINDS))
def test_the_folder_found_replays_where_it_is_gone_and_the_folder_made_where_it_is(tmp_path, how):
    """The narrowing: recorded where the folder was there (empty), it replays in a fresh
    checkout; recorded where it was absent, it replays where the run left it."""
    code = FINDS[how] + "print(os.path.realpath('work/d'), os.path.isdir('work/d'))"
    root = project(tmp_path, code)
    (root / "work/d").mkdir()
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/d").rmdir()  # a fresh checkout
    out, got = build(root)
    assert got == {"t": "cached"}, out
    out, got = build(root, "--force")  # recorded where it was absent; it is left there
    assert got == {"t": "passed"} and (root / "work/d").is_dir(), out
    out, got = build(root)
    assert got == {"t": "cached"}, out


def test_two_runs_that_make_or_find_the_same_folder_are_no_hazard(tmp_path):
    """One run's exist_ok mkdir makes the folder, the other's finds it: found (the
    footprint's ``found``), as a ``stat`` that finds it, not a lookup that missed."""
    # in ``work``: importing memotest lists the project folder, where the marks are made
    make = INSTALL + "os.makedirs('work/.benchmarks', exist_ok=True)"
    root = overlapping(tmp_path, make, make)
    (root / "work").mkdir()
    out, got = hazards(root)
    assert got == {"a": "passed", "b": "passed"}, out
    assert "hazard" not in out, out
    # b saw the folder appear while it ran: no record; it runs once more, finding it.
    # The marks are left, so that it does not wait for a, replayed (``SLOW``).
    _code, out, got = build_statuses(root, "-j", "2")
    assert "hazard" not in out and got["a"] == "cached", out
    _code, out, got = build_statuses(root, "-j", "2")
    assert got == {"a": "cached", "b": "cached"}, out


COLLECTION = "pytest-collection:tests"


def collection_variants(proj) -> int:
    """How many records the collection has: one more each time it ran, not replayed."""
    from memotest.store import Store

    with Store.open(proj, lock=False) as store:
        return len(store.variant_heads([COLLECTION]).get(COLLECTION, []))


@pytest.mark.parametrize("how", ["warm", "no-warm", "no-memotest"])
def test_a_pytest_build_recorded_with_benchmarks_there_replays_in_a_fresh_clone(
    tmp_path, host_pytest_plugins, how
):
    """The fleet's quickstart: machine 1's records come from runs where pytest-benchmark's
    ``.benchmarks`` was there; a fresh clone has none and replays the target, whether it
    forked from a worker that configured pytest, ran as a fresh process, or ran in an
    interpreter that cannot import memotest (``--pytest-python``: no ``narrow`` plugin).
    The collection forked from a warm worker replays too: ``narrow.py``'s
    ``pytest_configure`` wraps the storage's ``mkdir`` in the collection as in the
    targets. A fresh process's collection lists the project folder whole: it runs again
    and makes the folder again. A file there runs again."""
    # in the test extra; not in .ci/other-pythons' venvs (pytest and pytest-xdist only)
    pytest.importorskip("pytest_benchmark")
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # pytest-benchmark alone
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\naddopts = -p pytest_benchmark.plugin\n",
            "tests/test_a.py": "def test_a():\n    assert True\n",
        },
    )
    (proj / ".benchmarks").mkdir()
    args = ["-j1", "-v", "--pytest", "tests"]
    if how == "no-warm":
        args.insert(0, "--no-warm")
    if how == "no-memotest":
        python = python_without_memotest(tmp_path / "venv")
        args[:0] = ["--pytest-python", str(python)]
    a = "pytest:tests/test_a.py"
    rc, out, st = build_statuses(proj, *args, env=env)
    assert (rc, st) == (0, {a: "passed"}), out
    assert collection_variants(proj) == 1, out
    (proj / ".benchmarks").rmdir()  # the fresh clone
    rc, out, st = build_statuses(proj, *args, env=env)
    assert (rc, st) == (0, {a: "cached"}), out
    if how == "warm":
        assert collection_variants(proj) == 1 and not (proj / ".benchmarks").exists(), out
    if (proj / ".benchmarks").is_dir():
        (proj / ".benchmarks").rmdir()
    (proj / ".benchmarks").write_text("")
    rc, out, st = build_statuses(proj, *args, env=env)
    assert st != {a: "cached"}, out


# ``mkdir`` programs: POSIX's ``-p`` ends the same on an absent path and a directory
# (``tracer/creations.py``'s ``mkdir_p``); without ``-p`` it is a lock, with ``-v`` it says
# what it made. Outside an exist_ok scope the shim's ``Z`` says ``lock``: held as found,
# but for ``mkdir -p``.
MKDIRS = {
    "mkdir -p": (["mkdir", "-p", "work/d/e"], "cached"),
    # a lock: says so where it is held (a failed run would run again anyway)
    "mkdir": (["sh", "-c", "mkdir work/d/e || echo held"], "passed"),
    "mkdir -pv": (["mkdir", "-pv", "work/d/e"], "passed"),  # says "created" now
}


@pytest.mark.parametrize("how", sorted(MKDIRS))
def test_a_mkdir_program_that_found_the_folder_where_it_is_gone(tmp_path, how):
    argv, then = MKDIRS[how]
    root = write_tree(tmp_path / "proj", {"memotest.toml": f"[targets.t]\ncommand = {argv!r}\n"})
    (root / "work/d/e").mkdir(parents=True)
    out, got = build(root)
    assert got == {"t": "passed"}, out
    # the fresh checkout (the lock's folder only: plain mkdir makes no parents)
    shutil.rmtree(root / ("work/d/e" if how == "mkdir" else "work/d"))
    out, got = build(root)
    assert got == {"t": then}, out
