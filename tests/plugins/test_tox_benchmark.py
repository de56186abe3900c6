"""A tox env whose pytest has pytest-benchmark loaded and saves its results
(``--benchmark-json``), so that pytest-benchmark itself runs ``git`` for the commit
information (``git describe --dirty``, ``git show``, ``git rev-parse``) and
``python -m cpuinfo`` for the machine's: real tox, real git, real pytest-benchmark
(issue 25, the end-to-end check of ``model.ORDERLESS_PROGRAMS`` and the git index held by
its entries).

What each run costs, and why (what is asserted):

* run 1 runs (no record); run 2 may run once more, for the run's own leftovers
  (pytest-benchmark makes ``.benchmarks`` in the project folder, which a Python that
  reports no listings, ``python -m cpuinfo`` started by pytest-benchmark, may list after
  the folder was made; the record holds the folder's entries as they were before the run:
  ``docs/limits.md``, "A run's own leftovers"), or replay: which of the two is not
  asserted (it has gone both ways on different machines), only that a re-run is never
  for a modification-time order;
* run 3 replays, and so does a ``git checkout`` to another commit and back (git's stats
  are in no modification-time order, its index holds by its entries);
* a README edit re-runs, by the README's content (``git describe --dirty`` compares it
  with the index: its answer depends on it), never by an mtime order; the next run
  replays.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import memotest
from test_tox import PAD, count, env_project, environ, tox
from test_tox_git import git, pytestmark  # noqa: F401  (the same skips)

pytest.importorskip("pytest_benchmark")

TEST = """
    def area(n):
        return n * n

    def test_area(benchmark):
        assert benchmark.pedantic(area, args=(2,), rounds=3, iterations=1) == 4
    """


def project(tmp_path):
    counter = tmp_path / "counter"
    site = os.path.dirname(os.path.dirname(pytest.__file__))
    # The host's pytest and pytest-benchmark through PYTHONPATH (no install: a few seconds
    # a run); pytest-benchmark loaded by name, the host's other plugins not at all.
    setting = "\n".join(
        ["set_env =", f"{PAD}PYTHONPATH={site}", f"{PAD}PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
    )
    cmd = (
        "python -m pytest -q -p no:cacheprovider -p pytest_benchmark.plugin "
        "--benchmark-json={env_tmp_dir}/bench.json tests"
    )
    files = {"tests/test_bench.py": TEST, "README.md": "read me\n", "LICENCE": "licence\n"}
    root = env_project(tmp_path, counter, cmd, files, setting)
    (root / ".gitignore").write_text(".tox/\n.memotest/\n__pycache__/\n.benchmarks/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    git(root, "checkout", "-q", "-b", "other")
    (root / "README.md").write_text("read me, other\n")
    git(root, "commit", "-qam", "two")
    git(root, "checkout", "-q", "main")
    return root, counter


def test_pytest_benchmark_env_settles_replays_a_checkout_and_reruns_a_readme_by_content(
    tmp_path, host_pytest_plugins
):
    root, counter = project(tmp_path)
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 1, out
    info = json.loads((root / ".tox" / "py" / "tmp" / "bench.json").read_text())["commit_info"]
    assert len(info["id"]) == 40 and info["branch"] == "main", info  # from git
    code, out = tox(root, "-e", "py")  # may re-run once, for its own .benchmarks
    settled = count(counter)
    assert code == 0 and settled in (1, 2), out
    assert "modification-time order" not in out, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == settled and "memotest: cached, replayed" in out, out

    git(root, "checkout", "-q", "other")
    git(root, "checkout", "-q", "main")
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == settled and "memotest: cached, replayed" in out, out

    with (root / "README.md").open("a") as f:
        f.write("more\n")
    explained = memotest("explain", "-v", "tox:py", cwd=root, env=environ()).stdout.decode()
    assert "README.md: content changed" in explained, explained
    assert "modification-time order" not in explained, explained
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == settled + 1, out
    code, out = tox(root, "-e", "py")  # settled at once: .benchmarks was there before
    assert code == 0 and count(counter) == settled + 1, out
    assert "memotest: cached, replayed" in out, out
