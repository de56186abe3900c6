"""The nox adapter end to end: real nox, real memotest, real processes.

The loader (``memotest build -f noxfile.py``) and the ``memoized`` helper for noxfiles.
Commands prove whether they ran by appending to a counter file outside the project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable
NOX = str(Path(PY).parent / "nox") if (Path(PY).parent / "nox").is_file() else shutil.which("nox")

pytestmark = pytest.mark.skipif(NOX is None, reason="nox is not installed")


def environ(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", NO_COLOR="1")
    env.pop("MEMOTEST_NOX", None)
    env.update(extra)
    return env


def nox(root: Path, *args: str, env: dict | None = None) -> tuple[int, str]:
    assert NOX is not None
    proc = subprocess.run(
        [NOX, *args],
        cwd=root,
        env=env or environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr


def build(root: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    return build_statuses(root, "-j", "2", *args, report=root / "report.json")


def counter(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


# --- the loader ---------------------------------------------------------------------------

LOADER_NOXFILE = """
    import nox

    @nox.session(venv_backend="none")
    def lint(session):
        session.run("python", "-c", "print(open('lint.txt').read())")

    @nox.session(venv_backend="none")
    @nox.parametrize("n", ["1", "2"])
    def tests(session, n):
        session.run("python", "-c", f"print(open('data.txt').read() * {n})")

    @nox.session(venv_backend="none", default=False)
    def manual(session):
        session.run("python", "-c", "raise SystemExit(1)")
"""


def test_loader_lists_sessions_as_targets_and_caches(tmp_path):
    root = write_tree(tmp_path, {"noxfile.py": LOADER_NOXFILE, "lint.txt": "L", "data.txt": "D"})
    proc = memotest("list", "-f", "noxfile.py", cwd=root)
    listed = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    for name in ("nox:lint", "nox:tests(n='1')", "nox:tests(n='2')"):
        assert name in listed
    # Not selected by default (nox would not run it): listed, marked, and not built
    # without names (tests/plugins/test_nox_sessions.py names it).
    assert "nox:manual" in listed and "not default" in listed.split("nox:manual", 1)[1]

    code, out, st = build(root, "-f", "noxfile.py")
    assert code == 0, out
    assert st == {"nox:lint": "passed", "nox:tests(n='1')": "passed", "nox:tests(n='2')": "passed"}
    code, out, st = build(root, "-f", "noxfile.py")
    assert code == 0, out
    assert set(st.values()) == {"cached"}, out

    # Editing a file one session reads re-runs that session only; auto-detection (no -f)
    # finds the noxfile since there is no memotest.toml.
    (root / "lint.txt").write_text("L2")
    code, out, st = build(root)
    assert code == 0, out
    assert st == {"nox:lint": "passed", "nox:tests(n='1')": "cached", "nox:tests(n='2')": "cached"}


def test_memotest_toml_wins_over_auto_detected_noxfile(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "noxfile.py": LOADER_NOXFILE,
            "memotest.toml": f'[targets.only]\ncommand = ["{PY}", "-c", "pass"]\n',
        },
    )
    code, out, st = build(root)
    assert code == 0, out
    assert st == {"only": "passed"}


@pytest.mark.parametrize(
    ("source", "line", "error"),
    [
        ("import nox\n\n@nox.session\ndef broken(session)\n    pass\n", 4, "SyntaxError"),
        ("import nox\nimport no_such_module_here\n", 2, "ModuleNotFoundError"),
    ],
    ids=["syntax-error", "import-error"],
)
def test_broken_noxfile_is_a_configuration_error(tmp_path, source, line, error):
    (tmp_path / "noxfile.py").write_text(source)
    code, out, st = build(tmp_path, "-f", "noxfile.py")
    assert code == 2, out
    assert f"{tmp_path / 'noxfile.py'}:{line}: nox: " in out
    assert error in out
    assert st == {}
    assert not (tmp_path / ".memotest").exists()  # nothing ran, nothing recorded


# --- the memoized helper -------------------------------------------------------------------

HELPER_NOXFILE = """
    import os
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def tests(session):
        session.env["MODE"] = os.environ.get("TEST_MODE", "a")
        session.run(
            "python", "-c",
            "import os; open('../counter', 'a').write('x\\\\n');"
            "print('data=' + open('data.txt').read(), 'mode=' + os.environ['MODE'])",
        )
        out = session.run("python", "-c", "print('quiet-output')", silent=True)
        print("captured:", repr(out))

    @nox.session(venv_backend="none")
    @memoized
    def failing(session):
        session.run(
            "python", "-c",
            "open('../counter', 'a').write('x\\\\n'); print('boom-output'); raise SystemExit(3)",
        )
        session.run("python", "-c", "print('never-reached')")
"""


@pytest.fixture
def helper_project(tmp_path):
    root = write_tree(tmp_path / "proj", {"noxfile.py": HELPER_NOXFILE, "data.txt": "one"})
    return root, tmp_path / "counter"


def nox_merged(root: Path, *args: str) -> tuple[int, str]:
    """:func:`nox` with its output and its errors in one stream, in the order written."""
    proc = subprocess.run(
        [NOX, *args],
        cwd=root,
        env=environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout


def note_after_output(out: str, want: str) -> None:
    """The memotest note that says ``want`` comes after the session's output."""
    note = next(line for line in out.splitlines() if want in line and "memotest:" in line)
    assert out.index("data=one mode=a") < out.index(note), out


def test_memoized_session_replays_and_reruns_on_change(helper_project):
    root, count = helper_project
    code, out = nox_merged(root, "-s", "tests")
    assert code == 0, out
    assert counter(count) == 1
    assert "data=one mode=a" in out
    assert "captured: 'quiet-output\\n'" in out
    note_after_output(out, " ran: ")

    code, out = nox_merged(root, "-s", "tests")
    assert code == 0, out
    assert counter(count) == 1  # not run again
    assert "data=one mode=a" in out  # but its output is shown
    assert "captured: 'quiet-output\\n'" in out  # silent=True still returns the output
    assert "up to date" in out
    note_after_output(out, " is up to date: ")

    (root / "data.txt").write_text("two")  # a file the command reads
    code, out = nox(root, "-s", "tests")
    assert code == 0, out
    assert counter(count) == 2
    assert "data=two mode=a" in out

    code, out = nox(root, "-s", "tests", env=environ(TEST_MODE="b"))  # a session variable
    assert code == 0, out
    assert counter(count) == 3
    assert "mode=b" in out

    code, out = nox(root, "-s", "tests", env=environ(MEMOTEST_NOX="off"))
    assert code == 0, out
    assert counter(count) == 4


def test_memoized_failing_command_fails_the_session_every_time(helper_project):
    root, count = helper_project
    for n in (1, 2):
        code, out = nox(root, "-s", "failing")
        assert code == 1, out
        assert counter(count) == n  # a failure is never replayed: it runs again
        assert "boom-output" in out
        assert "failed with exit code 3" in out
        assert "Session failing failed" in out
        assert "never-reached" not in out


def test_memoized_steps_aside_under_memotest_build(helper_project):
    # The loader's target runs the whole session traced; the helper must not memoize
    # inside it (it would wait for the store lock the build holds).
    root, count = helper_project
    code, out, st = build(root, "nox:tests")
    assert code == 0, out
    assert st == {"nox:tests": "passed"}
    assert counter(count) == 1
    code, out, st = build(root, "nox:tests")
    assert st == {"nox:tests": "cached"}
    assert counter(count) == 1


def _wheel(folder: Path, version: str) -> None:
    for old in folder.glob("*.whl"):
        old.unlink()
    info = f"dep-{version}.dist-info"
    with zipfile.ZipFile(folder / f"dep-{version}-py3-none-any.whl", "w") as z:
        z.writestr("dep.py", f"VERSION = {version!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: dep\nVersion: {version}\n")
        z.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(
            f"{info}/RECORD", f"dep.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n"
        )


VENV_NOXFILE = """
    import glob
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="virtualenv")
    @memoized
    def tests(session):
        session.install("--no-index", *glob.glob("wheels/*.whl"))
        session.run(
            "python", "-c",
            "import dep; open('../counter', 'a').write('x\\\\n');"
            "print('dep-version', dep.VERSION)",
        )
"""


def test_memoized_in_a_real_venv_reruns_when_a_dependency_changes(tmp_path):
    pytest.importorskip("virtualenv")
    root = write_tree(tmp_path / "proj", {"noxfile.py": VENV_NOXFILE})
    (root / "wheels").mkdir()
    count = tmp_path / "counter"
    _wheel(root / "wheels", "1.0")
    code, out = nox(root, "-s", "tests")
    assert code == 0, out
    assert "dep-version 1.0" in out and counter(count) == 1

    # nox rebuilds the venv (same contents): the install runs, the command is replayed.
    code, out = nox(root, "-s", "tests")
    assert code == 0, out
    assert "pip install" in out
    assert "dep-version 1.0" in out and counter(count) == 1

    # A new version of a dependency in the reused venv: the command runs again.
    _wheel(root / "wheels", "2.0")
    code, out = nox(root, "-r", "-s", "tests")
    assert code == 0, out
    assert "dep-version 2.0" in out and counter(count) == 2


REASON_NOXFILE = """
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def check(session):
        session.run(
            "python", "-c",
            "import sys; sys.exit(0 if open('code.txt').read().startswith('good') else 1)",
        )
"""


def test_the_note_gives_the_reason_of_the_run_that_decided(tmp_path):
    """fail -> revert (the older pass replayed) -> edit: the note names the edit, not
    "last run failed"."""
    root = write_tree(tmp_path / "proj", {"noxfile.py": REASON_NOXFILE, "code.txt": "good\n"})
    assert nox(root, "-s", "check")[0] == 0
    (root / "code.txt").write_text("bad\n")
    assert nox(root, "-s", "check")[0] == 1
    (root / "code.txt").write_text("good\n")
    code, out = nox(root, "-s", "check")
    assert code == 0 and "up to date" in out, out
    (root / "code.txt").write_text("good, edited\n")
    code, out = nox(root, "-s", "check")
    assert code == 0, out
    assert "code.txt: content changed" in out and "last run failed" not in out, out
