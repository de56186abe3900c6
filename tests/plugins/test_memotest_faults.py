"""Whatever fails inside memotest after a command ran, its result stands and it runs once.

Under every driver (``memotest build``, the tox plugin, the nox helper, make's
``memotest-sh``), real processes and the real tools: ``MEMOTEST_INJECT_FAULT`` makes
memotest fail where it really would (reading the trace, storing the record, reporting
the result; :mod:`memotest.drive.faults`). The command must run exactly once (a counter file
outside the project says so), its exit status and output are the result, shown once,
the reason ("memotest could not record") is printed without a traceback, and nothing is
cached. A failure *before* the command started runs it plainly, once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import build_statuses, write_tree

PY = sys.executable
BIN = Path(PY).parent
NOX = str(BIN / "nox") if (BIN / "nox").is_file() else shutil.which("nox")

pytestmark = pytest.mark.skipif(
    "MEMOTEST_TRACE_DIR" in os.environ, reason="the adapters step aside under a tracer"
)

#: A command that counts its runs in ../counter and prints a marker.
COUNT = "open('../counter', 'a').write('x'); print('the-output')"


def runs(root: Path) -> int:
    counter = root.parent / "counter"
    return len(counter.read_text()) if counter.exists() else 0


def environ(fault: str | None = None) -> dict[str, str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", NO_COLOR="1")
    for name in ("PYTHONHASHSEED", "TOX_ENV", "TOXENV", "MEMOTEST_NOX", "MAKEFLAGS"):
        env.pop(name, None)
    env["TOX_USER_CONFIG_FILE"] = os.devnull
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("MEMOTEST_INJECT_FAULT", None)
    if fault:
        env["MEMOTEST_INJECT_FAULT"] = fault
    return env


def tool(root: Path, *cmd: str, fault: str | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        cmd, cwd=root, env=environ(fault), capture_output=True, text=True, timeout=240
    )
    return proc.returncode, proc.stdout + proc.stderr


def assert_ran_once_not_cached(root: Path, code: int, out: str, stage: str, shown: int = 1) -> None:
    assert code == 0, out
    assert runs(root) == 1, f"the command ran {runs(root)} times\n{out}"
    assert out.splitlines().count("the-output") == shown, out  # its output, shown once
    assert "Traceback" not in out, out
    if stage == "report":
        assert "memotest could not report" in out, out
    else:
        assert "memotest could not record: InjectedFault" in out, out
    assert (root / ".memotest" / "faults.log").read_text().count("Traceback") >= 1


# --- memotest build -------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["record", "trace", "report"])
def test_build_keeps_the_result_and_goes_on(tmp_path: Path, stage: str) -> None:
    toml = f"""
        [targets.a]
        command = ["{PY}", "-c", "{COUNT}"]
        [targets.b]
        command = ["{PY}", "-c", "print('b ran')"]
    """
    root = write_tree(tmp_path / "p", {"memotest.toml": toml})
    env = environ(stage)
    code, out, st = build_statuses(root, "-j", "1", env=env)
    assert_ran_once_not_cached(root, code, out, stage, shown=0)  # a pass shows no log
    assert st == {"a": "passed", "b": "passed"}, out  # the build went on
    code, out, st = build_statuses(root, env=environ())
    if stage == "report":  # recorded before the report failed: it replays
        assert st == {"a": "cached", "b": "cached"} and runs(root) == 1, out
    else:  # nothing was cached: it runs again, then replays
        assert st == {"a": "passed", "b": "passed"} and runs(root) == 2, out
        assert build_statuses(root, env=environ())[2] == {"a": "cached", "b": "cached"}


def test_build_failing_before_a_command_reports_an_error_and_goes_on(tmp_path: Path) -> None:
    toml = f"""
        [targets.a]
        command = ["{PY}", "-c", "{COUNT}"]
    """
    root = write_tree(tmp_path / "p", {"memotest.toml": toml})
    code, out, st = build_statuses(root, env=environ("before"))
    assert code == 1 and st == {"a": "error"}, out
    assert "memotest could not run it: InjectedFault" in out and "Traceback" not in out, out
    assert runs(root) == 0
    code, out, st = build_statuses(root, env=environ())
    assert code == 0 and st == {"a": "passed"} and runs(root) == 1, out


# --- tox ------------------------------------------------------------------------------------

TOX_INI = f"""
    [tox]
    env_list = py
    [testenv]
    skip_install = true
    commands =
        python -c "{COUNT}"
"""


@pytest.mark.parametrize("stage", ["record", "trace", "report"])
def test_tox_never_runs_the_commands_twice(tmp_path: Path, stage: str) -> None:
    pytest.importorskip("tox")
    root = write_tree(tmp_path / "p", {"tox.ini": TOX_INI})
    code, out = tool(root, PY, "-m", "tox", "-e", "py", fault=stage)
    assert_ran_once_not_cached(root, code, out, stage)
    assert "without memoizing" not in out, out
    assert "py: OK" in out, out


def test_tox_failing_before_the_commands_runs_them_plainly_once(tmp_path: Path) -> None:
    pytest.importorskip("tox")
    root = write_tree(tmp_path / "p", {"tox.ini": TOX_INI})
    code, out = tool(root, PY, "-m", "tox", "-e", "py", fault="before")
    assert code == 0 and runs(root) == 1, out
    assert "running the commands without memoizing" in out, out


# --- nox (the memoized helper) --------------------------------------------------------------

NOXFILE = f"""
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def tests(session):
        session.run("python", "-c", "{COUNT}")
"""


@pytest.mark.skipif(NOX is None, reason="nox is not installed")
@pytest.mark.parametrize("stage", ["record", "trace", "report"])
def test_nox_helper_never_runs_a_command_twice(tmp_path: Path, stage: str) -> None:
    assert NOX is not None
    root = write_tree(tmp_path / "p", {"noxfile.py": NOXFILE})
    code, out = tool(root, NOX, "-s", "tests", fault=stage)
    assert_ran_once_not_cached(root, code, out, stage)
    assert "Session tests was successful" in out, out


@pytest.mark.skipif(NOX is None, reason="nox is not installed")
def test_nox_helper_failing_before_the_command_runs_it_plainly_once(tmp_path: Path) -> None:
    assert NOX is not None
    root = write_tree(tmp_path / "p", {"noxfile.py": NOXFILE})
    code, out = tool(root, NOX, "-s", "tests", fault="before")
    assert code == 0 and runs(root) == 1, out
    assert "without memoization" in out and "Traceback" not in out, out


# --- make (memotest-sh) ---------------------------------------------------------------------


def makefile(root: Path) -> None:
    text = f"""
        SHELL := memotest-sh
        .SHELLFLAGS = --target=$@ -c
        test:
        \t@{PY} -c "{COUNT}"
    """
    (root / "Makefile").write_text(textwrap.dedent(text).lstrip("\n"))


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is needed")
@pytest.mark.parametrize("stage", ["record", "trace", "report"])
def test_make_recipe_never_runs_twice(tmp_path: Path, stage: str) -> None:
    root = tmp_path / "p"
    root.mkdir()
    makefile(root)
    code, out = tool(root, "make", "--no-print-directory", "test", fault=stage)
    assert_ran_once_not_cached(root, code, out, stage)


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is needed")
def test_make_failing_before_the_recipe_runs_it_plainly_once(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    makefile(root)
    code, out = tool(root, "make", "--no-print-directory", "test", fault="before")
    assert code == 0 and runs(root) == 1 and "Traceback" not in out, out
