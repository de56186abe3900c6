"""The plain pytest process of a tox env or a nox session reports what its listings looked
for (``memotest_walk`` installs ``memotest/worker/listings.py`` in it): a leftover a plugin
makes in the current folder after the import system listed it (pytest-benchmark's
``.benchmarks``) does not cost a second full run, a new module an import would now find
first re-runs, a listing by another process keeps the folder whole. Real tox, real nox,
real pytest, a real plugin."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import write_tree
from test_nox import NOX, counter, nox
from test_nox import environ as nox_environ
from test_tox import count, env_project, tox, write
from test_tox import pytestmark as tox_marks

#: tox's skips (tox missing, under an outer tracer), and nox's.
pytestmark = [*tox_marks, pytest.mark.skipif(NOX is None, reason="nox is not installed")]

SITE = os.path.dirname(os.path.dirname(pytest.__file__))
#: A plugin like pytest-benchmark: its folder in the current folder, made at configure time.
PLUGIN = """
    import os

    def pytest_configure(config):
        os.makedirs(".benchmarks", exist_ok=True)
    """
SHAPES = "def area(n):\n    return n * n\n"
#: ``tmp_path`` under ``--basetemp``: pytest empties that folder through descriptors
#: (``shutil.rmtree``), outside the project.
TEST = """
    from shapes import area

    def test_area(tmp_path):
        assert area(2) == 4
    """
#: Another process lists the current folder: every entry of it counts.
LS_TEST = """
    import subprocess
    from shapes import area

    def test_area():
        subprocess.run(["ls", "-a"], check=True, stdout=subprocess.DEVNULL)
        assert area(2) == 4
    """
#: A child forked from the pytest process lists it: it reports nothing of its own.
FORK_TEST = """
    import os
    from shapes import area

    def test_area():
        pid = os.fork()
        if pid == 0:
            os.listdir(".")
            os._exit(0)
        os.waitpid(pid, 0)
        assert area(2) == 4
    """
#: A forked child imports a module through the caches of the folders its parent listed:
#: what it looked for there is in no report.
FORK_IMPORT_TEST = """
    import os

    def test_area():
        pid = os.fork()
        if pid == 0:
            from shapes import area
            os._exit(0 if area(2) == 4 else 1)
        _, status = os.waitpid(pid, 0)
        assert status == 0
    """


def tox_project(tmp_path: Path, test: str) -> Path:
    """A skip_install project whose ``py`` env bumps a counter and runs ``python -m pytest
    -p leftover --basetemp={env_tmp_dir} tests``; ``shapes`` comes from ``lib`` (on
    ``PYTHONPATH``), not from the project folder, which ``python -m`` puts first on
    ``sys.path``."""
    counter_file = tmp_path / "counter"
    write(tmp_path / "lib", {"shapes.py": SHAPES, "leftover.py": PLUGIN})
    path = os.pathsep.join([SITE, str(tmp_path / "lib")])
    return env_project(
        tmp_path,
        counter_file,
        "python -m pytest -q -p no:cacheprovider -p leftover --basetemp={env_tmp_dir} tests",
        {"README.md": "# proj\n", "tests/test_a.py": test},
        f"set_env = PYTHONPATH={path}",
    )


def test_tox_a_leftover_in_the_listed_folder_replays_a_new_module_reruns(tmp_path):
    counter_file = tmp_path / "counter"
    root = tox_project(tmp_path, TEST)
    code, out = tox(root, "-e", "py")
    assert code == 0 and "1 passed" in out and "not cached" not in out, out
    assert (root / ".benchmarks").is_dir()
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out and count(counter_file) == 1, out
    # A file no import looks for: nothing re-runs; nor folders no import looked for, nor a
    # file with no extension (the watch starts at the interpreter's start-up, before the
    # current folder is on sys.path: walk_path/sitecustomize.py).
    # memotest_walk's own part still holds: a file pytest walked past, edited, replays.
    (root / "NOTES.txt").write_text("notes\n")
    write_tree(root, {"build/lib/x.py": "", "htmlcov/index.html": "", "VERSION": "1\n"})
    (root / "dist").mkdir()
    (root / "README.md").write_text("# proj\n\nA much longer description.\n")
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out and count(counter_file) == 1, out
    # The test itself: it runs again.
    (root / "tests/test_a.py").write_text(textwrap.dedent(TEST) + "\n# edited\n")
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter_file) == 2, out
    # A new conftest.py where pytest looks for one: it runs again (the counter says so).
    (root / "conftest.py").write_text("def pytest_configure(config):\n    pass\n")
    code, out = tox(root, "-e", "py")
    assert code == 0 and count(counter_file) == 3, out
    # A module the test's import now finds first, in the folder python -m put first.
    (root / "shapes.py").write_text("def area(n):\n    return n + n + 1\n")
    code, out = tox(root, "-e", "py")
    assert code != 0 and count(counter_file) == 4, out
    assert "shapes.py" in out, out


#: The test walks the current folder through descriptors: every entry counts.
FWALK_TEST = """
    import os
    from shapes import area

    def test_area():
        assert [top for top, _, _, _ in os.fwalk(".")]
        assert area(2) == 4
    """


#: ``copy`` tries ``org.python.core`` (Jython's) at pytest's start-up, before the watch is
#: installed: an ``org`` package in the current folder is found next time.
JYTHON_TEST = """
    import copy

    def test_no_jython():
        assert not [t for t in copy._copy_dispatch if t.__name__ == "PyStringMap"]
    """


#: One env per way of listing the current folder that memotest does not see reported,
#: each in a folder of its own (its ``change_dir``, where its ``.benchmarks`` appears).
WHOLE = {"ls": LS_TEST, "fork": FORK_TEST, "fwalk": FWALK_TEST, "forkimport": FORK_IMPORT_TEST}


def envs_project(tmp_path: Path, envs: dict[str, str]) -> Path:
    """:func:`tox_project`'s env once per test of ``envs``: each bumps ``counter-NAME`` and
    runs pytest in ``NAME/`` (one tox run runs them all, each its own record)."""
    write(tmp_path / "lib", {"shapes.py": SHAPES, "leftover.py": PLUGIN})
    path = os.pathsep.join([SITE, str(tmp_path / "lib")])
    bump = f"python -c \"open(r'{tmp_path}/counter-{{env_name}}', 'a').write('x')\""
    pytest_line = "python -m pytest -q -p no:cacheprovider -p leftover --basetemp={env_tmp_dir}"
    ini = f"""
        [tox]
        env_list = {", ".join(envs)}
        [testenv]
        skip_install = true
        set_env = PYTHONPATH={path}
        change_dir = {{tox_root}}/{{env_name}}
        commands =
            {bump}
            {pytest_line} tests
        """
    tests = {f"{name}/tests/test_a.py": test for name, test in envs.items()}
    return write(tmp_path / "proj", {"tox.ini": ini, **tests})


def test_tox_a_listing_by_another_process_keeps_the_folder_whole(tmp_path):
    """Another process lists it (``ls``), a child forked from pytest lists it (it reports
    nothing of its own), pytest walks it through descriptors (``fwalk``), a forked child
    imports through the caches of the folders its parent listed: the ``.benchmarks`` the
    first run left re-runs each env (its own counter), and a module the forked child's
    import now finds re-runs that env. Beside them, ``startup``'s folder is held by the
    names looked for: it replays, and an ``org`` package ``copy`` looked for at pytest's
    start-up, before the watch was installed, re-runs it."""
    envs = {**WHOLE, "startup": JYTHON_TEST}
    root = envs_project(tmp_path, envs)
    counts = lambda: {name: count(tmp_path / f"counter-{name}") for name in envs}  # noqa: E731
    code, out = tox(root)
    assert code == 0 and out.count("1 passed") == len(envs), out
    assert counts() == dict.fromkeys(envs, 1), out
    code, out = tox(root)
    assert code == 0 and counts() == {**dict.fromkeys(WHOLE, 2), "startup": 1}, out
    assert out.count("directory gained entries: .benchmarks") == len(WHOLE), out
    assert out.count("memotest: cached, replayed") == 1, out
    (root / "forkimport" / "shapes.py").write_text("def area(n):\n    return 0\n")
    package = {"org/__init__.py": "", "org/python/__init__.py": ""}
    write(
        root / "startup", {**package, "org/python/core.py": "class PyStringMap(dict):\n    pass\n"}
    )
    code, out = tox(root, "-e", "forkimport,startup")
    assert code != 0, out
    assert counts() == {**dict.fromkeys(WHOLE, 2), "forkimport": 3, "startup": 2}, out
    assert out.count("1 failed") == 2, out


NOXFILE = f"""
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def tests(session):
        session.run({sys.executable!r}, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "leftover", "tests", external=True)
"""
COUNTED_TEST = """
    from shapes import area

    def test_area():
        open("../counter", "a").write("x\\n")
        assert area(2) == 4
"""


def nox_project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    write_tree(tmp_path / "lib", {"shapes.py": SHAPES, "leftover.py": PLUGIN})
    root = write_tree(
        tmp_path / "proj",
        {"noxfile.py": NOXFILE, "README.md": "# proj\n", "tests/test_a.py": COUNTED_TEST},
    )
    env = nox_environ(PYTHONPATH=str(tmp_path / "lib"))
    return root, env


#: The report channel reaches the pytest process memotest narrowed, not the processes it
#: starts (the variable is taken out of its environment).
ENV_TEST = """
    def test_env():
        import os
        assert "MEMOTEST_LISTINGS" not in os.environ
"""


def test_nox_a_leftover_replays_a_new_module_reruns(tmp_path):
    """Also: pytest lists every folder of ``sys.path`` for distributions (the plugins whose
    asserts it rewrites) before it imports ``-p`` plugins: a new one in the current folder
    brings a plugin, and runs again."""
    root, env = nox_project(tmp_path)
    write_tree(root, {"tests/test_a.py": COUNTED_TEST + ENV_TEST})
    write_tree(tmp_path / "lib", {"noted.py": "def pytest_configure(config):\n    pass\n"})
    count_file = tmp_path / "counter"
    code, out = nox(root, "-s", "tests", env=env)
    assert code == 0 and "2 passed" in out and counter(count_file) == 1, out
    assert (root / ".benchmarks").is_dir()
    code, out = nox(root, "-s", "tests", env=env)
    assert code == 0 and "up to date" in out and counter(count_file) == 1, out
    (root / "CHANGES.md").write_text("## 1.1\n")
    write_tree(root, {"build/lib/x.py": "", "VERSION": "1\n"})
    (root / "dist").mkdir()
    code, out = nox(root, "-s", "tests", env=env)
    assert code == 0 and "up to date" in out and counter(count_file) == 1, out
    write_tree(
        root,
        {
            "noted-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: noted\n",
            "noted-1.0.dist-info/entry_points.txt": "[pytest11]\nnoted = noted\n",
        },
    )
    code, out = nox(root, "-s", "tests", env=env)
    assert code == 0 and "up to date" not in out and counter(count_file) == 2, out
    (root / "shapes.py").write_text("def area(n):\n    return 5\n")
    code, out = nox(root, "-s", "tests", env=env)
    assert code != 0 and counter(count_file) == 3, out


#: A program lists the folder, then becomes a pytest that reports (same pid): the report
#: is the pytest image's, not the program's.
EXEC_NOXFILE = f"""
    import nox
    from memotest_nox import memoized

    CODE = (
        "import os, sys; os.listdir('.'); "
        "os.execv(sys.executable, [sys.executable, '-m', 'pytest', '-q', '-p', "
        "'no:cacheprovider', '-p', 'memotest_walk', '-p', 'leftover', 'tests'])"
    )

    @nox.session(venv_backend="none")
    @memoized
    def tests(session):
        session.run({sys.executable!r}, "-c", CODE, external=True)
"""


def test_nox_a_listing_before_the_pytest_image_keeps_the_folder_whole(tmp_path):
    from memotest_pytest.walk import FOLDER

    root, env = nox_project(tmp_path)
    write_tree(root, {"noxfile.py": EXEC_NOXFILE})
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], FOLDER])
    count_file = tmp_path / "counter"
    code, out = nox(root, "-s", "tests", env=env)
    assert code == 0 and "1 passed" in out and counter(count_file) == 1, out
    code, out = nox(root, "-s", "tests", env=env)
    assert code == 0 and counter(count_file) == 2, out
    assert "directory gained entries: .benchmarks" in out, out
