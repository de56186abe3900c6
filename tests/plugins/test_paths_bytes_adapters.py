"""Paths that are not UTF-8 under the tox plugin and the nox helper, real tools end to end.

The commands look up ``"\\udcff"`` (absent), read a file named ``caf\\xe9`` and list a
folder holding an entry ``y\\xff``: the first run records them, the second replays, and
editing the file or adding an entry runs again, with the path printed escaped. (Issue 19:
such a lookup crashed the store and tox then ran every command a second time.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import memotest, write_tree

PY = sys.executable
BIN = Path(PY).parent
NOX = str(BIN / "nox") if (BIN / "nox").is_file() else shutil.which("nox")

pytestmark = pytest.mark.skipif(
    "MEMOTEST_TRACE_DIR" in os.environ, reason="the adapters step aside under a tracer"
)

PROBE = """
import os
open("../counter", "a").write("x")
print("exists:", os.path.exists("\\udcff"))
print("read:", open(b"caf\\xe9", "rb").read().decode())
print("listed:", len(os.listdir("d")))
"""


def project(root: Path, files: dict[str, str]) -> Path:
    write_tree(root, {"probe.py": PROBE, **files})
    broot = os.fsencode(root)
    with open(os.path.join(broot, b"caf\xe9"), "wb") as f:
        f.write(b"one")
    os.utime(os.path.join(broot, b"caf\xe9"), (1_600_000_000, 1_600_000_000))
    os.mkdir(os.path.join(broot, b"d"))
    open(os.path.join(broot, b"d", b"y\xff"), "wb").close()
    return root


def runs(root: Path) -> int:
    counter = root.parent / "counter"
    return len(counter.read_text()) if counter.exists() else 0


def run(root: Path, *cmd: str) -> tuple[int, str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", NO_COLOR="1")
    for name in ("PYTHONHASHSEED", "TOX_ENV", "TOXENV", "MEMOTEST_NOX", "MEMOTEST_INJECT_FAULT"):
        env.pop(name, None)
    env["TOX_USER_CONFIG_FILE"] = os.devnull
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, timeout=240)
    return proc.returncode, (proc.stdout + proc.stderr).decode("utf-8", "backslashreplace")


def check_lifecycle(root: Path, *cmd: str, replayed: str, settles: bool = True) -> None:
    """Records, replays, re-runs for an edited file and for a new entry; with ``settles``,
    each re-run's new record replays next (the store's part, under ``run_memoized``, the
    same for both tools: the nox case checks it, the tox case does not repeat it)."""
    code, out = run(root, *cmd)
    assert code == 0 and "Traceback" not in out and "not cached" not in out, out
    assert "read: one" in out and runs(root) == 1, out
    code, out = run(root, *cmd)
    assert code == 0 and runs(root) == 1 and replayed in out, out  # replayed, not run
    assert "read: one" in out, out

    with open(os.path.join(os.fsencode(root), b"caf\xe9"), "wb") as f:
        f.write(b"two")
    code, out = run(root, *cmd)
    assert code == 0 and runs(root) == 2 and "read: two" in out, out
    assert "caf\\xe9: content changed" in out or replayed not in out, out
    if settles:
        assert run(root, *cmd)[0] == 0 and runs(root) == 2

    open(os.path.join(os.fsencode(root), b"d", b"z\xfe"), "wb").close()
    code, out = run(root, *cmd)
    assert code == 0 and runs(root) == 3, out
    if settles:
        assert run(root, *cmd)[0] == 0 and runs(root) == 3

    # The records, as memotest shows them (the store next to the config file).
    proc = memotest("list", cwd=root)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr


def test_tox_records_and_replays_paths_that_are_not_utf8(tmp_path: Path) -> None:
    pytest.importorskip("tox")
    ini = """
        [tox]
        env_list = py
        [testenv]
        skip_install = true
        commands = python probe.py
    """
    root = project(tmp_path / "p", {"tox.ini": ini})
    tox = (PY, "-m", "tox", "-e", "py")
    check_lifecycle(root, *tox, replayed="memotest: cached, replayed", settles=False)
    proc = memotest("show", "tox:py", "--paths", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert b"caf\\xe9" in proc.stdout and b"\\udcff" not in proc.stdout, proc.stdout
    assert b"/\\xff" in proc.stdout, proc.stdout  # the absent "\udcff", escaped


@pytest.mark.skipif(NOX is None, reason="nox is not installed")
def test_nox_helper_records_and_replays_paths_that_are_not_utf8(tmp_path: Path) -> None:
    assert NOX is not None
    noxfile = """
        import nox
        from memotest_nox import memoized

        @nox.session(venv_backend="none")
        @memoized
        def tests(session):
            session.run("python", "probe.py")
    """
    root = project(tmp_path / "p", {"noxfile.py": noxfile})
    check_lifecycle(root, NOX, "-s", "tests", replayed="is up to date")
