"""A replayed call's effects must be in place: real nox, the ``memoized`` helper.

The helper memoizes each ``session.run`` on its own, so a later call of the session may
read what an earlier one wrote (``coverage run`` then ``coverage combine``). A call is
replayed only while the files it wrote still hold what its run left there, and the files
it deleted are still absent (``memotest/inputs/effect.py``); otherwise it runs.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
from conftest import write_tree
from test_nox import NOX, counter, environ, nox

pytestmark = pytest.mark.skipif(NOX is None, reason="nox is not installed")

WRITER_NOXFILE = """
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def chain(session):
        # call 1 writes data.out (and makes then removes scratch.tmp); call 2 reads data.out
        session.run(
            "python", "-c",
            "import os; open('../writes', 'a').write('x\\\\n');"
            "open('data.out', 'w').write(open('src.txt').read() + '!');"
            "open('scratch.tmp', 'w').write('t'); os.remove('scratch.tmp')",
        )
        session.run("python", "-c", "print('read=' + open('data.out').read())")
"""


@pytest.fixture
def writer(tmp_path):
    root = write_tree(tmp_path / "proj", {"noxfile.py": WRITER_NOXFILE, "src.txt": "one"})
    return root, tmp_path / "writes"


def test_a_call_whose_written_file_is_gone_runs_again(writer):
    root, writes = writer
    code, out = nox(root, "-s", "chain")
    assert code == 0, out
    assert counter(writes) == 1 and "read=one!" in out

    code, out = nox(root, "-s", "chain")  # everything in place: call 1 replays
    assert code == 0, out
    assert counter(writes) == 1 and "read=one!" in out

    (root / "data.out").unlink()  # what call 1 wrote is gone: it must run, not replay
    code, out = nox(root, "-s", "chain")
    assert code == 0, out
    assert counter(writes) == 2 and "read=one!" in out
    assert "data.out: what the last run wrote is gone" in out

    (root / "data.out").write_text("stale")  # changed by someone else: call 1 runs again
    code, out = nox(root, "-s", "chain")
    assert code == 0, out
    assert counter(writes) == 3 and "read=one!" in out
    assert "data.out: what the last run wrote has changed" in out


def test_a_call_whose_deleted_file_is_back_runs_again(writer):
    root, writes = writer
    for _ in range(2):
        code, out = nox(root, "-s", "chain")
        assert code == 0, out
    assert counter(writes) == 1
    (root / "scratch.tmp").write_text("left over")  # the run removed it: replaying would not
    code, out = nox(root, "-s", "chain")
    assert code == 0, out
    assert counter(writes) == 2
    assert not (root / "scratch.tmp").exists()
    assert "scratch.tmp: what the last run deleted is back" in out


# --- the coverage session of nox's own noxfile (issue 19), on a real virtualenv ------------

COVERAGE_NOXFILE = """
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="virtualenv")
    @memoized
    def tests(session):
        session.install("coverage")
        session.run("coverage", "erase")
        session.run("coverage", "run", "--parallel-mode", "check.py")
        session.run("coverage", "combine")
        session.run("coverage", "report", "--fail-under=100", "--include=lib.py")
"""

LIB = """
    def f(flag):
        if flag:
            return 1
        return 2
"""

# Covers all of lib.py only when both branches are taken: ``full.txt`` says whether to.
CHECK = """
    import lib
    import os
    assert lib.f(True) == 1
    if os.path.exists("full.txt"):
        assert lib.f(False) == 2
"""


def _online(folder: Path) -> bool:
    try:
        code = subprocess.run(
            ["python", "-m", "pip", "download", "--no-deps", "-d", str(folder), "coverage"],
            capture_output=True,
            timeout=60,
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        return False
    return code == 0


@pytest.mark.skipif(importlib.util.find_spec("virtualenv") is None, reason="no virtualenv")
def test_coverage_session_passes_on_every_run_and_never_erases_by_replay(tmp_path):
    downloads = tmp_path / "dl"
    if not _online(downloads):
        pytest.skip("PyPI is not reachable: the session installs coverage from it")
    root = write_tree(
        tmp_path / "proj",
        {"noxfile.py": COVERAGE_NOXFILE, "lib.py": LIB, "check.py": CHECK, "full.txt": ""},
    )
    # Each run's fresh venv installs coverage from the wheel just downloaded, not the index.
    env = environ(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(downloads))
    for run in (1, 2, 3):
        code, out = nox(root, "-s", "tests", env=env)
        assert code == 0, f"run {run}:\n{out}"
        assert "No data to combine" not in out
        assert "100%" in out
    # Only half of lib.py is covered now: the report must fail, whatever data of an
    # earlier run is left (coverage erase replayed over it would let it pass).
    (root / "full.txt").unlink()
    code, out = nox(root, "-s", "tests", env=env)
    assert code != 0, out
    assert "Coverage failure" in out or "fail-under" in out or "FAIL Required" in out, out


def test_paths_of_the_project_are_left_as_found(tmp_path):
    # Sanity: the project's own files are untouched by a replay (a replay writes nothing).
    root = write_tree(tmp_path / "proj", {"noxfile.py": WRITER_NOXFILE, "src.txt": "one"})
    for _ in range(2):
        code, out = nox(root, "-s", "chain")
        assert code == 0, out
    assert Path(root / "data.out").read_text() == "one!"
