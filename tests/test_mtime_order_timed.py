"""Which stats are in the modification-time order (``inputs/order.py``): only those that
handed a process the file's times (``T`` in the shim's log), and not those of ``git``,
which compares a file's stat only with its own index entry. Real targets, real shim.

The attacks come first: each program below obtains two mtimes by another entry point and
decides by them; a flip of the order must re-run it. Then what is no longer held: a pair
only looked up by ``access``/``readlink``, or only stat'ed by ``git``, flipped, replays.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import aged_pair, build_statuses, flip

PY = sys.executable


def statuses(root: Path) -> dict[str, str]:
    _code, out, st = build_statuses(root, "-v")
    assert st, out
    return st


def project(root: Path, command: str | list[str]) -> Path:
    """``gen`` an hour older than now, ``src`` two: ``gen`` is the newer."""
    root.mkdir(parents=True)
    (root / "memotest.toml").write_text(f"[targets.t]\ncommand = {command!r}\n")
    aged_pair(root)
    return root


# The attacks: each entry point that hands a program a time, compared in some program.
ATTACKS = {
    # coreutils ``stat`` (statx) in two processes, compared by the shell that read them
    "statx-in-two-processes": "test $(stat -c %Y gen) -gt $(stat -c %Y src) || exit 1",
    # Python's os.lstat (fstatat with AT_SYMLINK_NOFOLLOW)
    "python-lstat": [
        PY,
        "-c",
        "import os, sys; sys.exit(os.lstat('gen').st_mtime_ns <= os.lstat('src').st_mtime_ns)",
    ],
    # find -newer (fstatat of the reference and of each name)
    "find-newer": 'test -n "$(find gen -newer src)" || exit 1',
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_comparison_of_times_by_any_stat_reruns_when_the_order_flips(tmp_path, name):
    root = project(tmp_path / "p", ATTACKS[name])
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    flip(root)
    assert statuses(root) == {"t": "failed"}


def test_lookups_that_give_no_time_keep_out_of_the_order(tmp_path):
    # access() and readlink() find the files and hand back no time: nothing to compare
    code = (
        "import os; assert os.access('gen', os.R_OK) and os.access('src', os.R_OK); "
        "os.path.realpath('gen'); print('found')"
    )
    root = project(tmp_path / "p", [PY, "-c", code])
    assert statuses(root) == {"t": "passed"}
    flip(root)
    assert statuses(root) == {"t": "cached"}


GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs git")


def git_project(root: Path, command: str) -> Path:
    root = project(root, command)
    (root / ".gitignore").write_text(".memotest/\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, env=env)
    return root


@needs_git
def test_the_stats_git_makes_of_the_work_tree_keep_out_of_the_order(tmp_path):
    root = git_project(tmp_path / "p", "git status --porcelain --untracked-files=no")
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) in ({"t": "cached"}, {"t": "passed"})  # git may refresh its index
    assert statuses(root) == {"t": "cached"}
    flip(root)  # git sees src racily changed or not: same content, same answer
    assert statuses(root) == {"t": "cached"}


@needs_git
def test_a_comparison_beside_git_still_reruns(tmp_path):
    # git stats both files; so does the shell's ``-nt``, which decides by their order
    cmd = "git status --porcelain --untracked-files=no && test gen -nt src || exit 1"
    root = git_project(tmp_path / "p", cmd)
    assert statuses(root) == {"t": "passed"}
    statuses(root)
    assert statuses(root) == {"t": "cached"}
    flip(root)
    assert statuses(root) == {"t": "failed"}
