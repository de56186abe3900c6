"""Re-warming (``memotest/tracer/warm/pool.py``): in a build whose worker preloaded nothing
(the first, every target stale), once the runs taught the book enough, the next runs fork
from a worker that preloads it. Real pytest runs, forked from real workers."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import build_statuses, write_tree

#: A library outside the project (so preloadable) of many modules.
LIBRARY = {
    "libpkg/__init__.py": "".join(f"from libpkg import m{i}\n" for i in range(12)),
    **{f"libpkg/m{i}.py": f"V = {i}\n" for i in range(12)},
}
USES = """
import time

import libpkg

def test_uses():
    time.sleep(0.4)  # leaves the re-warm time to finish before the build ends
    assert libpkg.m{i}.V == {i}
"""


def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    site = write_tree(tmp_path / "site", LIBRARY)
    files = {f"tests/test_{c}.py": USES.format(i=i) for i, c in enumerate("abcdefgh")}
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", **files})
    return proj, dict(os.environ, PYTHONPATH=str(site))


def test_a_full_run_rewarms_its_worker_and_a_library_edit_still_reruns(tmp_path):
    proj, env = project(tmp_path)
    # Plain workers: with configured ones (the default) the book learns nothing of this
    # library, outside the interpreter's folders, and a re-warm has nothing to add.
    env["MEMOTEST_PYTEST_CONFIGURED"] = "0"
    code, out, st = build_statuses(proj, "-v", "-j1", "--pytest", env=env)
    assert code == 0, out
    assert set(st.values()) == {"passed"} and len(st) == 8, out
    assert "a warm worker's re-warm started" in out
    assert "a warm worker was re-warmed with what the runs imported" in out
    # The runs forked from the re-warmed worker hold what it read while preloading:
    # editing the library re-runs every target, and the one that checks it fails.
    (tmp_path / "site" / "libpkg" / "m7.py").write_text("V = 70\n")
    code, out, st = build_statuses(proj, "-v", "-j1", "--pytest", env=env)
    assert code == 1, out
    assert "cached" not in st.values(), out
    assert st["pytest:tests/test_h.py"] == "failed", out


def test_no_preload_means_no_rewarm(tmp_path):
    proj, env = project(tmp_path)
    code, out, _ = build_statuses(proj, "-v", "-j1", "--no-preload", "--pytest", env=env)
    assert code == 0, out
    assert "re-warmed" not in out


def test_no_rewarm_for_the_last_target(tmp_path):
    # One test file: once its run taught the book the library, no target is left that a
    # re-warmed worker could serve, so none is started (its start would cost more than
    # it saves; tracer/warm/pool.py's REWARM_RUNS_LEFT).
    site = write_tree(tmp_path / "site", LIBRARY)
    files = {"pytest.ini": "[pytest]\n", "tests/test_a.py": USES.format(i=1)}
    proj = write_tree(tmp_path / "proj", files)
    env = dict(os.environ, PYTHONPATH=str(site))
    code, out, st = build_statuses(proj, "-v", "-j1", "--pytest", env=env)
    assert code == 0 and st == {"pytest:tests/test_a.py": "passed"}, out
    assert "re-warm started" not in out, out
