"""An input changed by someone else while the target ran is not recorded as what it saw.

The attack: a user edits the tree while a build runs (saves a file, switches a branch).
A process started by the test, outside memotest's tracing, waits until the target has
made its observation, changes that input, and only then lets the target finish. The
record must not fingerprint the changed state as the one the target saw: the next
build would replay a result computed from the old state. Each kind of change is one the
file's own ctime does not show: a symlink re-pointed at an older file (the link's ctime
moves, the file's does not), a folder's mode (its ctime moves, its mtime does not), a
listed folder's entry renamed, deleted, or a subfolder renamed (the folder's times move).
The target is a real command under the real shim; the change is made by a thread of
the test, which no tracer sees (``model.changed_since``, ``inputs/base.py``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import outside

from memotest.memo import MemoResult, run_memoized
from memotest.model import Target

SH = "/bin/sh"


def setup_link(tmp: Path) -> tuple[str, Callable[[], None]]:
    (tmp / "old.txt").write_text("old\n")
    os.symlink("old.txt", tmp / "older-link")  # the link and its file both older
    (tmp / "new.txt").write_text("new\n")
    os.symlink("new.txt", tmp / "link")
    return "cat link", lambda: os.replace(tmp / "older-link", tmp / "link")


def setup_mode(tmp: Path) -> tuple[str, Callable[[], None]]:
    (tmp / "d").mkdir(mode=0o755)
    os.chmod(tmp / "d", 0o755)
    return "stat -c %a d", lambda: os.chmod(tmp / "d", 0o700)


def setup_listing(tmp: Path, change: str) -> tuple[str, Callable[[], None]]:
    d = tmp / "d"
    d.mkdir()
    (d / "x").write_text("x\n")
    (d / "sub").mkdir()
    (tmp / "older").write_text("older\n")  # made before the run: an old ctime
    (tmp / "gone").mkdir()

    def rename_file() -> None:
        os.replace(d / "x", tmp / "gone" / "x")
        os.replace(tmp / "older", d / "y")

    actions = {
        "file renamed": rename_file,
        "file deleted": lambda: os.unlink(d / "x"),
        "folder renamed": lambda: os.replace(d / "sub", d / "sub2"),
    }
    return "ls d", actions[change]


CASES: dict[str, Callable[[Path], tuple[str, Callable[[], None]]]] = {
    "symlink re-pointed to an older file": setup_link,
    "folder mode": setup_mode,
    "listing: file renamed in": lambda t: setup_listing(t, "file renamed"),
    "listing: file deleted": lambda t: setup_listing(t, "file deleted"),
    "listing: subfolder renamed": lambda t: setup_listing(t, "folder renamed"),
    # The tree changes the listed folder too: its times are no longer someone else's.
    "listing written by the tree: subfolder renamed": lambda t: (
        "ls d; : > d/out",
        setup_listing(t, "folder renamed")[1],
    ),
}


def make_case(tmp_path: Path, case: str) -> tuple[Target, Callable[[], None]]:
    """The case's tree (older than the run's start), its target and its change."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "sync").mkdir()
    observe, act = CASES[case](tree)
    os.mkfifo(tmp_path / "sync" / "go")
    time.sleep(0.05)  # everything above is older than the run's start
    # The target observes, says so, and waits for the outside to let it go on.
    marker, go = tmp_path / "sync" / "observed", tmp_path / "sync" / "go"
    script = f"{observe}; : > {marker}; read _ < {go}"
    return Target(name="t", command=(SH, "-c", script), cwd=str(tree)), act


def run_with_change(tmp_path: Path, target: Target, act: Callable[[], None] | None) -> MemoResult:
    """Runs ``target`` (or replays it), while the outside makes the change ``act`` once the
    target observed its input: a thread of the test, not a process of the target's tree
    (no tracer sees it)."""
    marker, go = tmp_path / "sync" / "observed", tmp_path / "sync" / "go"
    done = threading.Event()
    marker.unlink(missing_ok=True)

    helper = threading.Thread(target=outside, args=(marker, go, act, done))
    helper.start()
    try:
        return run_memoized(target, root=tmp_path / "tree")
    finally:
        done.set()
        helper.join(timeout=30)


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_input_changed_by_someone_else_while_the_target_ran_is_not_replayed(
    tmp_path: Path, case: str
) -> None:
    target, act = make_case(tmp_path, case)
    first = run_with_change(tmp_path, target, act)
    assert first.status == "passed", first.log
    assert first.note is not None and "while the target ran" in first.note, (case, first.note)
    again = run_with_change(tmp_path, target, None)
    assert not again.cached, (case, again.log)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_run_without_the_change_is_replayed(tmp_path: Path, case: str) -> None:
    # The harness alone (the marker, the pipe, the wait) keeps the result reusable.
    target, _act = make_case(tmp_path, case)
    first = run_with_change(tmp_path, target, None)
    assert first.status == "passed", first.log
    assert first.note is None, (case, first.note)
    again = run_with_change(tmp_path, target, None)
    if "written by the tree" in case:  # its own leftover is the next run's world: once more
        assert not again.cached and again.note is None, (case, again.note)
        again = run_with_change(tmp_path, target, None)
    assert again.cached, (case, again.note)


def test_an_ignored_folder_made_beside_by_another_process_keeps_the_record(
    tmp_path: Path,
) -> None:
    # The quickstart at -j2 in a fresh checkout: another target's import makes
    # `calc/__pycache__` while this one has listed `calc`. The build ignores it (it is in
    # no listing), so the folder's moved times are that change, not an unseen deletion.
    target, _act = make_case(tmp_path, "listing: file deleted")
    first = run_with_change(tmp_path, target, lambda: (tmp_path / "tree/d/__pycache__").mkdir())
    assert first.status == "passed", first.log
    assert first.note is None, first.note
    again = run_with_change(tmp_path, target, None)
    assert again.cached, again.note


PYTEST_WAITS = """\
import mod

try:
    import looked_for  # noqa: F401
except ImportError:
    pass


def test_waits():
    assert mod.X == 1
    open({marker!r}, "w").close()
    with open({go!r}) as go:
        go.read()
"""


@pytest.mark.parametrize(
    ("made", "replays"),
    [
        (".tool-cache", True),
        ("newmod.py", True),
        ("looked_for.py", False),
        ("looked_for", False),
    ],
)
def test_an_entry_no_reader_of_the_listing_looked_for_keeps_the_record(
    tmp_path: Path, made: str, replays: bool
) -> None:
    # The quickstart at -j2 where pytest-benchmark is installed: another target makes
    # `.benchmarks` (here `.tool-cache`) at the root while this one's pytest has listed
    # it (its import system, which reports what it looked for). No import takes a dotted
    # name: that is the change. Nor did one look for `newmod` (a plain pytest watches
    # the names its imports look for from its start: `walk_path/sitecustomize.py`).
    # A module or a package an import looked for and would now find is not: refused.
    import sys

    tree, sync = tmp_path / "tree", tmp_path / "sync"
    tree.mkdir()
    sync.mkdir()
    marker, go = sync / "observed", sync / "go"
    (tree / "mod.py").write_text("X = 1\n")
    (tree / "test_w.py").write_text(PYTEST_WAITS.format(marker=str(marker), go=str(go)))
    os.mkfifo(go)
    time.sleep(0.05)  # everything above is older than the run's start
    command = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_w.py")
    target = Target(name="t", command=command, cwd=str(tree))

    def make() -> None:
        if "." in made:
            (tree / made).mkdir()
        else:
            (tree / made).mkdir()
            (tree / made / "__init__.py").write_text("")

    if made.endswith(".py"):
        make = lambda: (tree / made).write_text("Y = 2\n")  # noqa: E731
    first = run_with_change(tmp_path, target, make)
    assert first.status == "passed", first.log
    if replays:
        assert first.note is None, first.note
        again = run_with_change(tmp_path, target, None)
        assert again.cached, again.note
    else:
        assert first.note is not None and "while the target ran" in first.note, first.note
