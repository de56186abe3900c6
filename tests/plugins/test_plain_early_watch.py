"""A plain pytest target (a targets file's ``python -m pytest``: a fresh process, not forked
from a warm worker) watches what its imports look for from the interpreter's start-up
(``plugins/memotest_pytest/walk_path/sitecustomize.py``), not from ``memotest_walk``'s
import on: the current folder, which ``python -m`` puts first on ``sys.path``, is held by
the names looked for there, so a new ``dist/``, ``build/`` or ``htmlcov/`` (or a file with
no extension) re-runs nothing, while a module an import now finds there re-runs what
looked for it, whenever that import was tried.

The attacks first: a test whose outcome depends on a failed import (a module, then a
namespace package); a plugin of the ini file's ``addopts``, imported by pytest's start-up
before ``memotest_walk``, trying an import; a name the interpreter's start-up looked for
before any watch (a ``PYTHONPATH`` folder of the project). Then the narrowing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import build_statuses, start_up_lookups, write_tree

TOML = """
[settings]
pass_env = ["PATH", "HOME", "LANG", "PYTHON*"]

[targets.probe]
command = "python -m pytest -q -p no:cacheprovider tests/test_probe.py"

[targets.probe_ns]
command = "python -m pytest -q -p no:cacheprovider tests/test_probe_ns.py"

[targets.other]
command = "python -m pytest -q -p no:cacheprovider tests/test_other.py"

[targets.child]
command = "python -m pytest -q -p no:cacheprovider tests/test_child.py"
"""
#: Passes while no module ``{0}`` can be imported.
PROBE = """
def test_no_extra():
    try:
        import {0}
    except ImportError:
        {0} = None
    assert {0} is None
"""
OTHER = "def test_other():\n    assert True\n"
#: A Python the test starts (``python -c``: the current folder first on its ``sys.path``)
#: inherits ``PYTHONPATH``, so the walk folder's ``sitecustomize``: it works as before, and
#: its listing of the current folder, which it does not report, keeps that folder whole.
CHILD = """
import subprocess, sys

def test_child():
    code = "import json, os; print(os.environ.get('MEMOTEST_LISTINGS'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.returncode, out.stdout, out.stderr) == (0, "None\\n", "")
"""


def env(**extra: str) -> dict[str, str]:
    out = dict(os.environ, **extra)
    out["PATH"] = os.path.dirname(sys.executable) + os.pathsep + out.get("PATH", "")
    return out


def build(root: Path, **extra: str):
    code, out, got = build_statuses(root, "-v", env=env(**extra))
    assert got, out
    return code, out, got


def test_a_failed_import_reruns_a_new_root_folder_no_import_looked_for_replays(tmp_path):
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": TOML,
            "pytest.ini": "[pytest]\n",
            "tests/test_probe.py": PROBE.format("extra_mod"),
            "tests/test_probe_ns.py": PROBE.format("extra_ns"),
            "tests/test_other.py": OTHER,
            "tests/test_child.py": CHILD,
        },
    )
    _, out, got = build(root)
    assert got == dict.fromkeys(["probe", "probe_ns", "other", "child"], "passed"), out
    # What a tox run, a coverage report, a wheel build or a venv leaves at the root, and
    # a file with no extension: no import looked for any of them.
    write_tree(root, {"htmlcov/index.html": "<html/>\n", "venv/pyvenv.cfg": "home = /usr\n"})
    for name in ("dist", "build"):
        (root / name).mkdir()
    (root / "VERSION").write_text("1.0\n")
    (root / "Makefile").write_text("all:\n")
    _, out, got = build(root)
    cached = dict.fromkeys(["probe", "probe_ns", "other"], "cached")
    assert got == {**cached, "child": "passed"}, out
    assert "directory gained entries: Makefile, VERSION, build" in out, out
    # A module the test's failed import now finds first, and a namespace package (a
    # folder with a module, no __init__.py): each re-runs what looked for it, and fails it.
    write_tree(root, {"extra_mod.py": "VALUE = 1\n", "extra_ns/part.py": "VALUE = 2\n"})
    code, out, got = build(root)
    expected = {"probe": "failed", "probe_ns": "failed", "other": "cached", "child": "passed"}
    assert code != 0 and got == expected, out
    assert "extra_mod.py" in out and "extra_ns" in out, out


#: A plugin of the ini file's ``addopts``: pytest imports it before ``PYTEST_ADDOPTS``'s
#: ``-p memotest_walk``, and it tries an import that fails.
STARTPLUG = """
import os

try:
    import early_name
except ImportError:
    early_name = None
if early_name is not None:
    os.environ["EARLY_NAME_SEEN"] = "1"
"""
#: A module the interpreter's start-up may look for in every ``PYTHONPATH`` folder before
#: any watch (``ntpath``, imported by ``pathlib`` for an editable install's finder, tries
#: ``from nt import ...``): found there, it says so.
SEEN = 'import os\nos.environ["{}"] = "1"\n'
START_TOML = """
[settings]
pass_env = ["PATH", "HOME", "LANG", "PYTHON*"]

[targets.start]
command = "python -m pytest -q -p no:cacheprovider tests/test_start.py"
"""
START_TEST = """
import os

def test_nothing_seen():
    assert "EARLY_NAME_SEEN" not in os.environ
    assert "STARTUP_SEEN" not in os.environ
"""


def test_a_name_looked_for_before_memotest_walk_reruns(tmp_path):
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": START_TOML,
            "pytest.ini": "[pytest]\naddopts = -p startplug\n",
            "startplug.py": STARTPLUG,
            "tests/test_start.py": START_TEST,
            "lib/README": "a folder of the project on PYTHONPATH\n",
        },
    )
    lib = root / "lib"
    _, out, got = build(root, PYTHONPATH=str(lib))
    assert got == {"start": "passed"}, out
    (root / "dist").mkdir()
    _, out, got = build(root, PYTHONPATH=str(lib))
    assert got == {"start": "cached"}, out
    # A module the ini's plugin looked for (before memotest_walk was imported).
    (root / "early_name.py").write_text("VALUE = 1\n")
    code, out, got = build(root, PYTHONPATH=str(lib))
    assert code != 0 and got == {"start": "failed"}, out
    (root / "early_name.py").unlink()
    _, out, got = build(root, PYTHONPATH=str(lib))
    assert got == {"start": "cached"}, out
    # A module the interpreter's start-up looked for in lib, before any watch: found now.
    # (The venv decides which: with nothing such, only the ini's plugin is attacked.)
    missed = start_up_lookups(lib)
    if missed:
        (lib / f"{missed[0]}.py").write_text(SEEN.format("STARTUP_SEEN"))
        code, out, got = build(root, PYTHONPATH=str(lib))
        assert code != 0 and got == {"start": "failed"}, (missed, out)


#: What a process started under the plain target (it inherits ``PYTHONPATH``) sees of
#: ``sitecustomize``.
SHOW_SITE = """
import builtins, sys
try:
    import sitecustomize
except ImportError as exc:
    print("none", type(exc).__name__, exc.name, exc)
else:
    print(sitecustomize.__file__, sitecustomize.NAME, builtins.REAL_SITE)
"""


def run_python(*args: str, path: list[Path | str]) -> subprocess.CompletedProcess:
    run_env = env(PYTHONPATH=os.pathsep.join(map(str, path)))
    run_env.pop("MEMOTEST_LISTINGS", None)
    return subprocess.run([sys.executable, *args], env=run_env, capture_output=True, text=True)


def test_the_walk_folder_s_sitecustomize_runs_the_next_one(tmp_path):
    """Without memotest's variable it only chains: to the next ``sitecustomize`` after its
    folder on ``sys.path`` (here a folder after it on ``PYTHONPATH``), which then is the
    module ``import sitecustomize`` gives; with none, the import fails as without it."""
    from memotest_pytest.walk import FOLDER

    real = write_tree(
        tmp_path / "real",
        {"sitecustomize.py": "import builtins\nbuiltins.REAL_SITE = 7\nNAME = 3\n"},
    )
    proc = run_python("-c", SHOW_SITE, path=[FOLDER, real])
    assert proc.stdout.split() == [str(real / "sitecustomize.py"), "3", "7"], proc
    assert proc.stderr == "", proc
    # None after it: as if there were none at all.
    without = run_python("-c", SHOW_SITE, path=[])
    proc = run_python("-c", SHOW_SITE, path=[FOLDER])
    assert (proc.stdout, proc.stderr) == (without.stdout, without.stderr), (proc, without)
    # One that raises: Python says so at start-up, as it does when it is found directly.
    (real / "sitecustomize.py").write_text("raise ValueError('broken site')\n")
    proc = run_python("-c", "print('ran')", path=[FOLDER, real])
    direct = run_python("-c", "print('ran')", path=[real])
    assert proc.stdout == "ran\n" and "broken site" in proc.stderr, proc
    assert proc.stderr == direct.stderr, (proc, direct)


MAKERS = """
[settings]
pass_env = ["PATH", "HOME", "LANG", "PYTHON*"]

[targets.a]
command = "python -m pytest -q -p no:cacheprovider tests/test_a.py"

[targets.b]
command = "python -m pytest -q -p no:cacheprovider tests/test_b.py"
"""
#: Each leaves a folder of its own at the root (an output, a report, a build).
MAKE = """
import os

def test_make():
    os.makedirs("out_{0}", exist_ok=True)
    with open("out_{0}/result.txt", "w") as f:
        f.write("{0}")
"""


def test_targets_that_make_folders_at_the_root_are_no_hazards_of_each_other(tmp_path):
    """Before, each held the root by every importable name: run side by side, each saw
    the other's folder appear (a hazard: both ran again, alone, in an order)."""
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": MAKERS,
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": MAKE.format("a"),
            "tests/test_b.py": MAKE.format("b"),
        },
    )
    _, out, got = build(root)
    assert got == {"a": "passed", "b": "passed"} and "hazard" not in out, out
    _, out, got = build(root)
    assert got == {"a": "cached", "b": "cached"}, out
