"""benchmarks/replay_git_history.py's pure parts: the commits a replay takes (first parent
only, oldest first), what a commit changed, the version hatch-vcs would give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import replay_git_history as history


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def test_first_parent_commits_oldest_first_and_their_changes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("1\n")
    (repo / "b.py").write_text("1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "side.py").write_text("1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "on the side")
    git(repo, "checkout", "-q", "main")
    (repo / "a.py").write_text("2\n")
    git(repo, "rm", "-q", "b.py")
    git(repo, "commit", "-q", "-am", "two")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    mirror = repo / ".git"

    found = history.commits(mirror, 10)

    # The side branch's commit is not on main's first-parent line.
    assert [c.subject for c in found] == ["one", "two", "merge side"], found
    first, second, merge = found
    assert history.diff(mirror, None, first.sha) == {
        "changed": [],
        "added": ["a.py", "b.py"],
        "removed": [],
    }
    assert history.diff(mirror, first.sha, second.sha) == {
        "changed": ["a.py"],
        "added": [],
        "removed": ["b.py"],
    }
    assert history.diff(mirror, second.sha, merge.sha)["added"] == ["side.py"]
    assert [c.subject for c in history.commits(mirror, 2)] == ["two", "merge side"]


@pytest.mark.parametrize(
    ("described", "version"),
    [
        ("26.1.0-51-gc1c1e0e2", "26.1.1.dev51"),
        ("25.5.0-0-g8174a86", "25.5.0"),
        ("v8.1.8-3-gabcdef0", "8.1.9.dev3"),
    ],
)
def test_dev_version_as_hatch_vcs_guesses_it(described: str, version: str) -> None:
    assert history.dev_version(described) == version
