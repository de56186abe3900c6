"""A tox env that runs pytest is not re-run by an edit of a file pytest only walked past
(``README.md``, ``CHANGES.md`` at the rootdir), and still re-runs when a test or the code
it imports changes. Real tox 4 (native ``tox.toml``; ``tox.ini``: see the test), real
pytest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_tox import count, environ, pytestmark, tox, write  # noqa: F401  (same skips)

SITE = os.path.dirname(os.path.dirname(pytest.__file__))
TEST = """
    from shapes import area

    def test_area():
        assert area(2) == 4
    """
SOURCE = "def area(n):\n    return n * n\n"


def bump(counter: Path) -> list[str]:
    return ["python", "-c", f"open(r'{counter}', 'a').write('x')"]


def config(counter: Path, pytest_args: list[str]) -> dict[str, str]:
    """A native ``tox.toml`` project whose skip_install ``py`` env bumps a counter and runs
    ``python -m pytest`` (the host's pytest, through ``PYTHONPATH``, without the host's
    plugins: pytest-benchmark makes ``.benchmarks`` in the folder pytest's import system
    listed, and the second run would run again for it, as ``test_own_leftovers.py``
    shows)."""
    cmd = ["python", "-m", "pytest", *pytest_args]
    text = f"""
        env_list = ["py"]
        [env_run_base]
        skip_install = true
        set_env = {{ PYTHONPATH = "{SITE}", PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }}
        commands = [{json.dumps(bump(counter))}, {json.dumps(cmd)}]
        """
    return {"tox.toml": text}


# Native ``tox.toml``, pytest given a file. (A ``tox.ini`` env whose pytest is given its
# tests folder, the same sequence: test_plain_listings.py's
# ``test_tox_a_leftover_in_the_listed_folder_replays_a_new_module_reruns``: an edited
# README replays, an edited test, a new conftest and a module found first at the root
# re-run; test_full_walk.py: pytest given no path, CHANGES.md edited too.)
def test_docs_edits_replay_code_edits_rerun(tmp_path):
    counter = tmp_path / "counter"
    root = write(
        tmp_path / "proj",
        {
            **config(counter, ["-q", "tests/test_a.py"]),
            "README.md": "# proj\n",
            "CHANGES.md": "## 1.0\n",
            "shapes.py": SOURCE,
            "tests/test_a.py": TEST,
        },
    )
    code, out = tox(root, "-e", "py")
    assert code == 0 and "1 passed" in out and "not cached" not in out, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out and count(counter) == 1, out
    # Files pytest's collection walks past: their size changes, nothing re-runs.
    (root / "README.md").write_text("# proj\n\nA much longer description.\n")
    (root / "CHANGES.md").write_text("## 1.1\n\n- more\n\n## 1.0\n")
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out and count(counter) == 1, out
    # The tests themselves, and the code they import: they run again.
    write(root, {"tests/test_a.py": TEST.replace("area(2) == 4", "area(3) == 9")})
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter) == 2 and "1 passed" in out, out
    assert "test_a.py: content changed" in out, out
    (root / "shapes.py").write_text("def area(n):\n    return n * 2 + 1\n")
    code, out = tox(root, "-e", "py")
    assert code != 0 and count(counter) == 3, out
    assert "shapes.py: content changed" in out, out


def test_which_commands_get_the_walk_plugin():
    from memotest_pytest.walk import FOLDER, narrowed, pytest_args_at

    assert pytest_args_at(["/e/bin/pytest", "-q", "tests"]) == 1
    assert pytest_args_at(["/e/bin/python3.11", "-m", "pytest", "tests"]) == 3
    assert pytest_args_at(["coverage", "run", "-p", "--source=src", "-m", "pytest"]) == 6
    # An interpreter option (-I ignores PYTHONPATH), a script, an option's value: as written.
    assert pytest_args_at(["python", "-I", "-m", "pytest"]) is None
    assert pytest_args_at(["coverage", "run", "--source", "src", "-m", "pytest"]) is None
    assert pytest_args_at(["python", "-m", "mypy"]) is None
    argv, env = narrowed(["pytest", "tests"], {"PYTHONPATH": "/mine", "A": "1"})
    assert argv == ["pytest", "-p", "memotest_walk", "tests"]
    assert env == {"PYTHONPATH": f"/mine:{FOLDER}", "A": "1"}  # the user's entries first
    assert set(os.listdir(FOLDER)) - {"__pycache__"} == {"memotest_walk.py", "sitecustomize.py"}
