"""A tox env whose pytest runs ``git`` (as pytest-benchmark does for its commit
information) in a git work tree: real tox, real git, real pytest (issue 25).

git stats every tracked file and refreshes its index: before, a ``git checkout`` to
another commit and back re-ran the env (``.git/HEAD is now newer than
.git/refs/heads/main``), and so did a README edit (``README.md is now newer than
LICENCE``), by the modification-time order alone. Now git's stats are in no order
(``model.ORDERLESS_PROGRAMS``) and its index holds by its entries
(``builtin/git_index.py``): the checkout and back replays; a README edit re-runs the env
because git stat'ed the README, whose content memotest holds (``explain`` names it), and
the next run replays.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import memotest
from test_tox import PAD, count, env_project, environ, tox

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# What pytest-benchmark asks git in every run.
TEST = """
    import subprocess

    def test_commit_info():
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True)
        assert len(head.stdout.strip()) == 40
        print("dirty:", bool(dirty.stdout.strip()))
    """


def git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    user = ["-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", *user, *args], cwd=root, check=True, env=env, stdout=-1)


def test_a_checkout_and_back_replays_and_a_readme_edit_reruns_by_its_content(tmp_path):
    counter = tmp_path / "counter"
    site = os.path.dirname(os.path.dirname(pytest.__file__))
    # No bytecode written (CI writes it, this machine does not): pytest's __pycache__ would
    # be a folder the run made and left, which may cost run 2 (docs/limits.md, "A run's own
    # leftovers"); here run 2 must replay.
    setting = "\n".join(
        [
            "set_env =",
            f"{PAD}PYTHONPATH={site}",
            f"{PAD}PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
            f"{PAD}PYTHONDONTWRITEBYTECODE=1",
        ]
    )
    files = {"tests/test_git.py": TEST, "README.md": "read me\n", "LICENCE": "licence\n"}
    cmd = "python -m pytest -q -p no:cacheprovider tests"
    root = env_project(tmp_path, counter, cmd, files, setting)
    (root / ".gitignore").write_text(".tox/\n.memotest/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    git(root, "checkout", "-q", "-b", "other")
    (root / "README.md").write_text("read me, other\n")
    (root / "LICENCE").write_text("licence, other\n")
    git(root, "commit", "-qam", "two")
    git(root, "checkout", "-q", "main")

    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1, out  # settled at its second run
    # Another commit and back: the same files, newer, and a rewritten index and HEAD.
    git(root, "checkout", "-q", "other")
    git(root, "checkout", "-q", "main")
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1, out
    assert "memotest: cached, replayed" in out, out
    # A README edit: git stat'ed it, and memotest holds a stat'ed file by its content.
    with (root / "README.md").open("a") as f:
        f.write("more\n")
    explained = memotest("explain", "tox:py", cwd=root, env=environ()).stdout.decode()
    assert "README.md: content changed" in explained, explained
    assert "modification-time order" not in explained, explained
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 2, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 2, out  # settled at its second run
