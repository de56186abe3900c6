"""A configured pytest worker imports, after its configuration and under pytest's own
assertion rewriting, the modules the runs had to import under it (``PreloadBook.prepared_for``,
``memotest/worker/serve.py``): rewritten as each run would rewrite them, and inputs of every
run; one the configuration had not marked, that a run marks, sends the run again fresh.
Real workers, real forks, under the real shim."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conftest import build_statuses, memotest, write_tree

from memotest.tracer.warm.preload import HINTS

PY = sys.executable
ON = {"MEMOTEST_PYTEST_CONFIGURED": "1"}

#: A distribution like Hypothesis's: a pytest plugin (``hypo_plugin``) and a library
#: (``hypolib``) that the plugin imports at the session's end; pytest marks both for
#: rewriting (its entry point's distribution), so a plain preload never imports them.
SITE = {
    "hypo_plugin.py": "def pytest_terminal_summary(terminalreporter):\n    import hypolib\n",
    "hypolib/__init__.py": """
        import os

        PID = os.getpid()

        def check(x):
            assert x == 3
    """,
    "late.py": "def check(x):\n    assert x == 3\n",
    "hypo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hypo\nVersion: 1.0\n",
    "hypo-1.0.dist-info/RECORD": "hypo_plugin.py,,\nhypolib/__init__.py,,\n",
    "hypo-1.0.dist-info/entry_points.txt": "[pytest11]\nhypo = hypo_plugin\n",
}


def write_hints(proj: Path, modules: list[str]) -> None:
    """What earlier runs taught: ``modules`` imported, each under pytest's rewriting."""
    (proj / HINTS).parent.mkdir(exist_ok=True)
    entry = {"modules": modules, "never": [], "fresh": modules}
    (proj / HINTS).write_text(json.dumps({"version": 1, "interpreters": {PY: entry}}))


def log(proj: Path, target: str, env: dict) -> str:
    return memotest("show", "--log", target, cwd=proj, env=env).stdout.decode()


def test_a_marked_module_is_imported_after_the_configuration_rewritten(tmp_path):
    site = write_tree(tmp_path / "site", SITE)
    env = dict(os.environ, PYTHONPATH=str(site), **ON)
    test = """
        import os

        import hypolib

        def test_imported_in_the_worker():
            assert hypolib.PID != os.getpid()

        def test_rewritten():
            hypolib.check(2)
    """
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", "tests/test_a.py": test})
    name = "pytest:tests/test_a.py"
    build_statuses(proj, "--pytest", env=env)  # a first build: its worker has no hints
    write_hints(proj, ["hypolib"])
    _, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert st == {name: "failed"}, out
    text = log(proj, name, env)
    assert "1 failed, 1 passed" in text, text  # the worker had imported hypolib
    assert "assert 2 == 3" in text  # and pytest had rewritten it
    assert "already imported" not in text + out
    assert "ran again, fresh" not in out
    # What the worker imported is an input of every run it forked.
    (site / "hypolib" / "__init__.py").write_text(
        "import os\n\nPID = os.getpid()\n\ndef check(x):\n    assert x == 4\n"
    )
    _, out, st = build_statuses(proj, "--pytest", env=env)
    assert st == {name: "failed"}, out
    assert "assert 2 == 4" in log(proj, name, env)


def test_a_run_that_marks_a_module_the_worker_imported_unmarked_starts_fresh(tmp_path):
    """``late`` was taught as imported under rewriting, but only a test module marks it
    (after the configuration): the worker imported it plain, so the run that marks it
    would not rewrite it; it runs again as a fresh process."""
    site = write_tree(tmp_path / "site", SITE)
    env = dict(os.environ, PYTHONPATH=str(site), **ON)
    test = """
        import pytest

        pytest.register_assert_rewrite("late")

        import late

        def test_late():
            late.check(2)
    """
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", "tests/test_b.py": test})
    name = "pytest:tests/test_b.py"
    build_statuses(proj, "--pytest", env=env)
    write_hints(proj, ["late"])
    _, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert st == {name: "failed"}, out
    assert "ran again, fresh: the worker had preloaded late" in out
    text = log(proj, name, env)
    assert "assert 2 == 3" in text, text
    assert "already imported" not in text
