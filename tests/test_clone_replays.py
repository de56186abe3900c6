"""A fresh ``git clone`` at another path replays from the remote cache (issue 25): the
quickstart committed to git, built against a real Redis (and nginx WebDAV) from one clone,
then built in a second clone elsewhere with an empty store, whose checkout wrote the files
in other clock ticks.

What kept the second clone from replaying was the ``order`` input: the mtimes of the
checked-out files that pytest only asked ``is_file()`` or ``is_dir()`` about
(``memotest.toml``, ``tests/data.json``), which a checkout writes tied or not depending on
the clock. Such probes are untimed now (``memotest/worker/untimed.py``, loaded into the
quickstart's plain ``python -m pytest`` commands by ``memotest_walk``:
``plugins/memotest_pytest/plain.py``). So the test forces the clock ticks rather than
waiting for them: the first clone's tracked files one second apart in path order, the
second's in the reverse order, two by two tied. Every pair of tracked files that one
clone has in one relation the other has in another.

This venv has pytest-benchmark, which a new user's does not: it makes ``.benchmarks`` in
the first run's folder, which later targets then see (in the clone, before anything ran,
they do not), so the targets here run pytest with ``-p no:benchmark``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import build_statuses
from servers import nginx_dav, redis_server

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart"
SERVERS = {"redis": redis_server, "nginx": nginx_dav}
#: What pytest-benchmark does in every run (its commit information): ``git`` stats every
#: tracked file and refreshes the index's stat data, which differ in every clone.
GIT_TARGET = """
[targets.status]
command = "git status --porcelain --untracked-files=no"
"""
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    user = ["-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", *user, *args], cwd=cwd, check=True, env=env, stdout=-1)


def committed_quickstart(root: Path) -> Path:
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns(".memotest", "__pycache__"))
    toml = root / "memotest.toml"
    toml.write_text(
        toml.read_text().replace("-p no:cacheprovider", "-p no:cacheprovider -p no:benchmark")
        + GIT_TARGET
    )
    (root / ".gitignore").write_text(".memotest/\n__pycache__/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "quickstart")
    return root


def git_out(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, check=True, env=env, stdout=-1).stdout.decode()


def clocked(clone: Path, mtime_of) -> None:
    """Sets the mtime of each tracked file of ``clone`` (the ``i``-th in path order, the
    order a checkout writes them in) to ``mtime_of(i)`` seconds before now."""
    now = time.time_ns()
    for i, name in enumerate(sorted(git_out(clone, "ls-files", "-z").split("\0")[:-1])):
        ns = now - mtime_of(i) * 10**9
        os.utime(clone / name, ns=(ns, ns))


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("MEMOTEST_REMOTE")}
    out["PATH"] = os.path.dirname(sys.executable) + os.pathsep + out.get("PATH", "")
    return out


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_a_clone_at_another_path_replays_every_target_from_the_remote(tmp_path, kind):
    origin = committed_quickstart(tmp_path / "origin")
    with SERVERS[kind](tmp_path / "server") as server:
        first = tmp_path / "machine1" / "quickstart"
        git(tmp_path, "clone", "-q", str(origin), str(first))
        clocked(first, lambda i: 100 - i)  # oldest first in path order, a second apart
        code, out, got = build_statuses(first, "--remote", server.url, env=env())
        assert code == 0 and set(got.values()) == {"passed"} and len(got) == 5, out
        # git refreshed the fresh clone's index in that run (its stat data only): the next
        # build replays all
        code, out, got = build_statuses(first, "--remote", server.url, env=env())
        assert code == 0 and got == dict.fromkeys(got, "cached"), out
        clone = tmp_path / "elsewhere" / "deeper" / "checkout"
        git(tmp_path, "clone", "-q", str(origin), str(clone))
        # newest first in path order, two by two tied: no pair as in the first clone
        clocked(clone, lambda i: i // 2 + 1)
        code, out, got = build_statuses(
            clone, "--remote-read-only", "--remote", server.url, env=env()
        )
        assert code == 0 and got == dict.fromkeys(got, "cached") and len(got) == 5, out
        assert "remote: 5 hits" in out, out
