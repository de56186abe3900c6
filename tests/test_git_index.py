"""A git index holds by its entries, not by the stat data git caches in it
(``memotest/builtin/git_index.py``): real git under the real shim.

The attack first: a change of the entries alone (the work tree as it was) re-runs a target
whose git output shows it. Then what no longer re-runs: git refreshing the stat data in a
run (after a commit, a ``touch``, in a fresh clone) is reusable at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import build_statuses, memotest

from memotest.builtin.git_index import git_index_digest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    user = ["-c", "user.email=t@t", "-c", "user.name=t"]
    out = subprocess.run(["git", *user, *args], cwd=root, check=True, env=env, stdout=-1)
    return out.stdout.decode()


def repo(root: Path, command: str) -> Path:
    root.mkdir(parents=True)
    (root / "memotest.toml").write_text(f"[targets.t]\ncommand = {command!r}\n")
    (root / ".gitignore").write_text(".memotest/\n")
    for name in ("a.txt", "b.txt", "README"):
        (root / name).write_text(name + "\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    return root


def statuses(root: Path) -> dict[str, str]:
    _code, out, got = build_statuses(root, "-v")
    assert got, out
    return got


def test_a_change_of_the_entries_alone_reruns(tmp_path):
    root = repo(tmp_path / "p", "git diff --cached --summary")
    assert statuses(root) == {"t": "passed"}
    statuses(root)
    assert statuses(root) == {"t": "cached"}
    git(root, "update-index", "--chmod=+x", "a.txt")  # the index's mode; a.txt as it was
    assert statuses(root) == {"t": "passed"}
    log = memotest("show", "--log", "t", cwd=root).stdout.decode()
    assert "mode change 100644 => 100755 a.txt" in log, log


def test_a_run_that_only_refreshes_the_index_settles_at_once(tmp_path):
    root = repo(tmp_path / "p", "git status --porcelain --untracked-files=no")
    assert statuses(root) == {"t": "passed"}
    statuses(root)
    assert statuses(root) == {"t": "cached"}
    # A commit smudges the entries of files not older than the index: the next ``git
    # status`` hashes them and writes the index again, with new stat data only.
    (root / "a.txt").write_text("changed\n")
    git(root, "commit", "-qam", "two")
    before = (root / ".git" / "index").read_bytes()
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}  # the second build replays
    after = (root / ".git" / "index").read_bytes()
    index = str(root / ".git" / "index")
    assert git_index_digest(before, index) == git_index_digest(after, index)


def test_the_stat_data_is_out_of_the_digest_and_the_rest_is_in(tmp_path):
    root = repo(tmp_path / "p", "true")
    index = root / ".git" / "index"
    first = git_index_digest(index.read_bytes(), str(index))
    assert first.startswith("git-index:")
    os.utime(root / "b.txt", ns=(1, 1))
    git(root, "update-index", "--really-refresh")
    assert git_index_digest(index.read_bytes(), str(index)) == first
    git(root, "update-index", "--chmod=+x", "b.txt")
    assert git_index_digest(index.read_bytes(), str(index)) != first
    # A file named ``index`` elsewhere, or a damaged index, stays whole.
    assert git_index_digest(index.read_bytes(), str(root / "index")) == "unparsed"
    assert git_index_digest(index.read_bytes()[:-1], str(index)) == "unparsed"
