"""A nox session that installs the project into its venv (``session.install(".")``) and
runs pytest there: real nox, real virtualenv, real pip, real pytest (issue 25).

nox remakes the venv at every session start (no ``-r``): the package and its console
script are installed again, each run, with new modification times (and a new
``direct_url.json``, ``RECORD``). What pytest and the console script observe of them is
their content: the memoized ``session.run`` replays on run 2. A code change runs it again.
"""

from __future__ import annotations

import os

import pytest
from conftest import memotest, write_tree
from test_nox import counter, environ, nox, pytestmark  # noqa: F401  (the same skips)
from test_tox import BACKEND

pytest.importorskip("virtualenv")

SITE = os.path.dirname(os.path.dirname(pytest.__file__))
# The project's wheel gets a console script, ``demo`` (``demo:main``).
ENTRY = '    files[f"{DIST}/entry_points.txt"] = b"[console_scripts]\\ndemo = demo:main\\n"\n'
DEMO_BACKEND = BACKEND.replace("    meta = f", ENTRY + "    meta = f", 1)

NOXFILE = f"""
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="virtualenv")
    @memoized
    def tests(session):
        session.install("--no-index", "--no-build-isolation", ".")
        # The host's pytest through PYTHONPATH (no install from an index); none of its
        # other plugins.
        session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
                    *session.posargs,
                    env={{"PYTHONPATH": {SITE!r}, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}})
"""
TEST = """
    import shutil
    import subprocess

    from demo import area

    def test_area_and_the_console_script():
        open("../counter", "a").write("x\\n")
        assert area(2) == 4
        out = subprocess.run([shutil.which("demo")], capture_output=True, text=True).stdout
        print("demo says", out.strip())
"""


def test_a_session_that_reinstalls_the_package_replays_on_run_2(tmp_path):
    """Run 2 replays; the attack: what the reinstall wrote is held by its content, so a
    console script that now calls another function (the entry point changed, the module
    did not) runs the tests again."""
    root = write_tree(
        tmp_path / "proj",
        {
            "pyproject.toml": """
                [build-system]
                requires = []
                build-backend = "backend"
                backend-path = ["."]
                """,
            "backend.py": DEMO_BACKEND,
            "src/demo/__init__.py": "def area(n):\n    return n * n\n\n\n"
            "def main():\n    print(area(3))\n\n\ndef other():\n    print('other')\n",
            "noxfile.py": NOXFILE,
            "README.md": "# demo\n",
            "tests/test_demo.py": TEST,
        },
    )
    count = tmp_path / "counter"
    code, out = nox(root, "-s", "tests", "--", "-s")
    assert code == 0 and "demo says 9" in out and counter(count) == 1, out
    script = root / ".nox" / "tests" / "bin" / "demo"
    before = script.stat().st_mtime_ns

    code, out = nox(root, "-s", "tests", "--", "-s")  # a new venv, the package reinstalled
    assert code == 0, out
    assert script.stat().st_mtime_ns != before  # the console script was written again
    assert "up to date" in out and counter(count) == 1, out
    assert "demo says 9" in out  # the recorded output, replayed
    explained = memotest("explain", "nox:tests:1", cwd=root, env=environ()).stdout.decode()
    assert "up to date" in explained, explained

    (root / "backend.py").write_text(DEMO_BACKEND.replace("demo:main", "demo:other"))
    code, out = nox(root, "-s", "tests", "--", "-s")
    assert code == 0 and "demo says other" in out and counter(count) == 2, out
