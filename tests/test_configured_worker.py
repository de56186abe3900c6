"""pytest targets forked from a worker that configured pytest (``memotest_pytest.worker_side``
``prepare``): each file's run as a fresh ``python -m pytest FILE`` would go, and a change
to what the worker configured with (a conftest, a plugin) re-runs every file. Real
workers, real forks, under the real shim."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import build_statuses, memotest, needs_code_noting, plugin_site, write_tree

build = build_statuses

CONFTEST = """
import os
import sys

import pytest

import helper  # imported while pytest captures: it keeps pytest's capture file as stdout

CONFIGURED = []
MANAGED = []  # the pid that made pytest's fixture manager


def pytest_plugin_registered(plugin):
    if type(plugin).__name__ == "FixtureManager":
        MANAGED.append(os.getpid())


def pytest_addoption(parser):
    parser.addoption("--flavour", default="vanilla")


def pytest_configure(config):
    CONFIGURED.append(os.getpid())


@pytest.fixture
def flavour(pytestconfig):
    return pytestconfig.getoption("flavour")
"""

TEST_A = """
import os
import sys

import pytest

import conftest
import helper


def test_configured_in_another_process():
    assert conftest.CONFIGURED and conftest.CONFIGURED[0] != os.getpid()


def test_fixtures_parsed_in_another_process(flavour):
    assert conftest.MANAGED and conftest.MANAGED[0] != os.getpid()


def test_option_of_the_conftest(flavour):
    assert flavour == "vanilla"


def test_stdout_kept_by_a_module_the_conftest_imported():
    assert helper.OUT is sys.stdout  # the capture's file then and now, as in a fresh run


def test_stdin_is_captured():
    with pytest.raises(OSError):
        sys.stdin.read()


def test_rewritten():
    values = [1, 2]
    assert values == [1, 3]
"""

#: What a run does at its exit that a fresh process keeps, which the child's end without
#: tearing down the worker's modules (``memotest/worker/child.py``'s ``exit_now``) must
#: keep too: the exit handlers it registered run, the garbage is collected, the buffers of
#: the standard output and of a file the run left open are written.
TEST_B = """
import atexit
import gc
import sys


KEPT = []


class Cycle:
    def __del__(self):
        sys.stdout.write("a cycle finalized at exit\\n")


def at_exit():
    gc.disable()
    cycle = Cycle()
    cycle.me = cycle
    del cycle
    # Buffered, whatever PYTHONUNBUFFERED says: written at the exit only.
    sys.stdout = open(1, "w", buffering=8192, closefd=False)
    sys.stdout.write("Python stdout flushed at exit\\n")


def test_sub(sub, flavour):
    atexit.register(at_exit)
    KEPT.append(open(1, "w", buffering=8192, closefd=False))
    KEPT[0].write("a file left open flushed at exit\\n")
    assert (sub, flavour) == (3, "vanilla")
"""


def project(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "helper.py": "import sys\nOUT = sys.stdout\n",
            "conftest.py": CONFTEST,
            "tests/test_a.py": TEST_A,
            "tests/sub/conftest.py": "import pytest\n\n@pytest.fixture\ndef sub():\n    return 3\n",
            "tests/sub/test_b.py": TEST_B,
        },
    )


def log(proj: Path, target: str, env: dict | None = None) -> str:
    return memotest("show", "--log", target, cwd=proj, env=env).stdout.decode()


#: The switch, on by default (``docs/adapters/pytest.md``).
ON = {"MEMOTEST_PYTEST_CONFIGURED": "1"}


def test_each_file_runs_as_a_fresh_pytest_would_after_the_worker_configured_it(tmp_path):
    proj = project(tmp_path)
    code, out, st = build(proj, "-v", "-j", "2", "--pytest")  # the default
    assert code == 1, out
    assert st == {"pytest:tests/test_a.py": "failed", "pytest:tests/sub/test_b.py": "passed"}, out
    # The collection's worker, its run ended, became one of the two folders' workers.
    assert "a warm worker whose runs ended was prepared for others" in out, out
    text = log(proj, "pytest:tests/test_a.py")
    assert "1 failed, 5 passed" in text, text  # only test_rewritten fails
    assert "At index 1 diff: 2 != 3" in text  # the test file's asserts were rewritten
    text = log(proj, "pytest:tests/sub/test_b.py")
    assert "1 passed" in text, text
    for end in ("a cycle finalized", "Python stdout flushed", "a file left open flushed"):
        assert f"{end} at exit" in text, text
    # Turned off, each run configures pytest itself: the check of the pid fails (the first
    # build's would pass if the runs configured pytest).
    env = dict(os.environ, MEMOTEST_PYTEST_CONFIGURED="0")
    build(proj, "--force", "--pytest", "tests/test_a.py", env=env)
    text = log(proj, "pytest:tests/test_a.py", env)
    assert "3 failed, 3 passed" in text, text
    assert "test_configured_in_another_process" in text
    assert "test_fixtures_parsed_in_another_process" in text


def test_a_conftest_or_plugin_change_reruns_every_file_configured_with_it(tmp_path):
    site = plugin_site(tmp_path / "site")
    (site / "myplug.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef plugged():\n    return 2\n"
    )
    env = dict(os.environ, PYTHONPATH=str(site), **ON)
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "conftest.py": "import pytest\n\n@pytest.fixture\ndef base():\n    return 1\n",
            "tests/test_a.py": "def test_a(base, plugged):\n    assert (base, plugged) == (1, 2)\n",
            "tests/test_b.py": "def test_b(base):\n    assert base == 1\n",
            "tests/sub/test_c.py": "def test_c(plugged):\n    assert plugged == 2\n",
        },
    )
    names = ("pytest:tests/test_a.py", "pytest:tests/test_b.py", "pytest:tests/sub/test_c.py")
    code, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == dict.fromkeys(names, "passed"), out
    code, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == dict.fromkeys(names, "cached"), out
    # The root conftest: every file was configured with it, even one that does not use it.
    (proj / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef base():\n    return 0\n"
    )
    code, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert code == 1, out
    assert st == {
        "pytest:tests/test_a.py": "failed",
        "pytest:tests/test_b.py": "failed",
        "pytest:tests/sub/test_c.py": "passed",  # ran again: it does not use base
    }, out
    assert "cached" not in out
    # The plugin, loaded through its entry point by the worker.
    (site / "myplug.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef plugged():\n    return 5\n"
    )
    _, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == {
        "pytest:tests/test_a.py": "failed",
        "pytest:tests/test_b.py": "failed",
        "pytest:tests/sub/test_c.py": "failed",
    }, out
    assert "assert 5 == 2" in log(proj, "pytest:tests/sub/test_c.py", env)


HELPERS = """
LEVEL = 1
AT_CONFIGURE = []


def at_configure():
    AT_CONFIGURE.append("configured")


def used_by_a():
    return 1


def used_by_b():
    return 2
"""


#: Python's start-up imports it (``PYTHONPATH``): it reads the project's ``settings.py``
#: before the worker's watchers are on, as a ``.pth`` file's hook may.
SITECUSTOMIZE = """
import os

MODE = None
_SETTINGS = os.path.join(os.path.dirname(__file__), "..", "proj", "settings.py")
if os.path.exists(_SETTINGS):
    with open(_SETTINGS) as f:
        MODE = f.readline().split(":")[-1].strip()
"""


@needs_code_noting
def test_code_a_conftest_imported_is_held_by_what_ran_in_the_worker_and_each_run(tmp_path):
    """The worker notes the code its configuration ran (``worker/prepared_code.py``): a
    module the root conftest imports is held, in each run, by its module body and what
    the configuration called (every run's) and by what that run called itself. What the
    worker read before its watchers were on (``vouched.py``: here Python's start-up, a
    ``sitecustomize`` reading a comment of a module) stays whole in every run's record,
    even in a run that imported that module and is held by its code otherwise."""
    boot = write_tree(tmp_path / "boot", {"sitecustomize.py": SITECUSTOMIZE})
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "helpers.py": HELPERS,
            "conftest.py": "import helpers\n\ndef pytest_configure(config):\n"
            "    helpers.at_configure()\n",
            "tests/test_a.py": "import helpers\n\ndef test_a():\n"
            "    assert helpers.used_by_a() == 1\n",
            "settings.py": "# mode: fast\nVALUE = 1\n",
            "tests/test_b.py": "import helpers\nimport settings\nimport sitecustomize\n\n"
            "def test_b():\n"
            "    assert helpers.used_by_b() == 2 and helpers.AT_CONFIGURE == ['configured']\n"
            "    assert (settings.VALUE, sitecustomize.MODE) == (1, 'fast')\n",
        },
    )
    env = dict(os.environ, PYTHONPATH=str(boot), **ON)
    a, b = "pytest:tests/test_a.py", "pytest:tests/test_b.py"
    _, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == {a: "passed", b: "passed"}, out
    # Both fork, side by side, from the collection's worker, promoted: what the collection
    # wrote in its trace before retargeting its own (its log) is no input of theirs, or
    # they would conflict on it (``promote.py``).
    assert "hazard" not in out, out
    helpers = proj / "helpers.py"
    # A function only test_a's run called: test_b's run holds.
    helpers.write_text(HELPERS.replace("return 1", "return 3 - 2"))
    _, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == {a: "passed", b: "cached"}, out
    # A function only the worker's configuration called: every run depended on it.
    helpers.write_text(
        HELPERS.replace("return 1", "return 3 - 2").replace('"configured"', '"changed"')
    )
    _, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == {a: "passed", b: "failed"}, out
    # The module's body, run by the worker: every run depended on it.
    helpers.write_text(HELPERS.replace("LEVEL = 1", "LEVEL = int('1')"))
    _, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == {a: "passed", b: "passed"}, out
    # A comment of a module test_b imports, which only the worker's start-up read (before
    # the mark): its code is the same, but the file is whole in every run's record. Fails
    # if every read of the worker is vouched (test_b cached).
    settings = proj / "settings.py"
    settings.write_text(settings.read_text().replace("fast", "slow"))
    _, out, st = build(proj, "-j", "2", "--pytest", env=env)
    assert st == {a: "passed", b: "failed"}, out
