"""Warm workers (``memotest/tracer/warm/``): runs forked from a process that has already
imported what they need. Real workers, real forks, under the real shim."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, plugin_site, write_tree

from memotest.model import Target
from memotest.run.runner import Runner
from memotest.tracer.warm.pool import WorkerPool
from memotest.tracer.warm.spec import WarmSpec, WarmUnavailable
from memotest.tracer.warm.worker import Worker

PY = sys.executable

# A test that passes only when its process was forked from a warm worker.
FORKED_TEST = """
import os

def test_forked_from_the_worker():
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        assert b"memotest_shim_retarget" in f.read()
"""


build = build_statuses


def test_pytest_targets_run_forked_from_a_warm_worker(tmp_path):
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": FORKED_TEST,
            "tests/test_b.py": FORKED_TEST,
            "tests/test_c.py": "def test_fails():\n    assert 1 == 2\n",
        },
    )
    code, out, st = build(proj, "-j", "2", "--pytest")
    assert code == 1, out
    assert st == {
        "pytest:tests/test_a.py": "passed",
        "pytest:tests/test_b.py": "passed",
        "pytest:tests/test_c.py": "failed",
    }
    assert "assert 1 == 2" in out  # the forked run's output is its log
    code, out, st = build(proj, "-j", "2", "--pytest")
    assert st["pytest:tests/test_a.py"] == "cached", out
    assert st["pytest:tests/test_b.py"] == "cached", out
    # --no-warm starts fresh processes, whose parent is memotest: the check fails.
    code, out, st = build(proj, "--force", "--no-warm", "--pytest", "tests/test_a.py")
    assert st == {"pytest:tests/test_a.py": "failed"}, out


def site_project(tmp_path: Path, ini: str, test_a: str) -> tuple[Path, Path, dict]:
    """A project whose ``tests/test_a.py`` is ``test_a`` (and ``test_b.py`` checks that it
    was forked), and the environment that puts :func:`plugin_site` on ``PYTHONPATH``."""
    site = plugin_site(tmp_path / "site")
    files = {"pytest.ini": ini, "tests/test_a.py": test_a, "tests/test_b.py": FORKED_TEST}
    proj = write_tree(tmp_path / "proj", files)
    return site, proj, dict(os.environ, PYTHONPATH=str(site))


def test_a_change_to_what_only_the_worker_read_reruns_the_targets(tmp_path):
    test = "def test_site():\n    assert SITE_VALUE == 1\n"
    site, proj, env = site_project(tmp_path, "[pytest]\n", test)
    code, out, st = build(proj, "--pytest", env=env)
    assert code == 0, out
    assert set(st.values()) == {"passed"}
    proc = memotest("show", "--paths", "pytest:tests/test_a.py", cwd=proj, env=env)
    assert str(site / "sitecustomize.py") in proc.stdout.decode()
    code, out, st = build(proj, "--pytest", env=env)
    assert set(st.values()) == {"cached"}, out
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_VALUE = 0\n")
    code, out, st = build(proj, "-v", "--pytest", env=env)
    assert st == {"pytest:tests/test_a.py": "failed", "pytest:tests/test_b.py": "passed"}, out


def test_plugins_are_imported_by_each_run_so_pytest_rewrites_them(tmp_path):
    """A plugin the worker had imported could not be rewritten: pytest would warn (an
    error under filterwarnings = error) and its failed asserts would say less."""
    ini = "[pytest]\nfilterwarnings = error\n"
    _, proj, env = site_project(tmp_path, ini, "def test_plugged(plugged):\n    pass\n")
    _, out, st = build(proj, "--pytest", env=env)
    assert st == {"pytest:tests/test_a.py": "failed", "pytest:tests/test_b.py": "passed"}, out
    assert "already imported" not in out
    assert "assert 2 == 3" in out  # rewritten: the values are shown


def test_verbose_says_why_a_worker_was_not_used_and_the_runs_start_fresh(tmp_path):
    # A thread started at start-up: forking would lose it, so the worker is not used.
    site = write_tree(
        tmp_path / "site",
        {
            "sitecustomize.py": "import threading, time\nthreading.Thread(target=time.sleep, "
            "args=(60,), daemon=True).start()\n"
        },
    )
    test = "import threading\n\ndef test_thread():\n    assert threading.active_count() == 2\n"
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", "tests/test_a.py": test})
    env = dict(os.environ, PYTHONPATH=str(site))
    code, out, st = build(proj, "-v", "--pytest", env=env)
    assert code == 0 and st == {"pytest:tests/test_a.py": "passed"}, out
    assert "a warm worker could not be used (more than one thread after start-up)" in out


def warm_target(cwd: Path, module: str, **kw) -> Target:
    return Target(name=module, command=(PY, "-m", module), cwd=str(cwd), warm=("warmdep",), **kw)


@pytest.fixture
def modules(tmp_path):
    root = write_tree(
        tmp_path / "mods",
        {
            "warmdep.py": "VALUE = 1\n",
            "readsome.py": """
                import sys, warmdep
                print("value", warmdep.VALUE, open("data.txt").read().strip())
                sys.exit(3)
            """,
            "sleeper.py": "import time\ntime.sleep(60)\n",
            "leaves.py": """
                import os, time
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                print("parent done")
            """,
            "data.txt": "hello\n",
        },
    )
    time.sleep(0.1)  # older than a worker started now (a newer file makes it unusable)
    return root


def env_for(mods: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(mods))


@pytest.fixture
def runner():
    pool = WorkerPool()
    yield Runner(pool=pool)
    pool.close()


def run(runner: Runner, mods: Path, module: str, **kw):
    return runner.run(warm_target(mods, module, **kw), env_for(mods))


def test_a_warm_run_reports_its_exit_log_and_the_workers_reads(modules, runner):
    first = run(runner, modules, "readsome")
    second = run(runner, modules, "readsome")
    for outcome in (first, second):
        assert outcome.status == "failed" and outcome.exit_code == 3
        assert outcome.log == b"value 1 hello\n"
        trace = outcome.trace
        assert trace is not None and trace.complete, trace.incomplete
        assert str(modules / "data.txt") in trace.reads  # the run's own read
        assert str(modules / "warmdep.py") in trace.reads  # the worker's
    # One worker served both: its process is in both traces, the runs' are not.
    pids = [{p.pid for p in o.trace.processes} for o in (first, second)]  # type: ignore[union-attr]
    assert len(pids[0] & pids[1]) == 1


def test_runs_at_once_are_forked_from_one_worker(modules, runner):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(lambda _: run(runner, modules, "readsome"), range(3)))
    for o in outcomes:
        assert o.exit_code == 3 and o.log == b"value 1 hello\n"
        assert o.trace is not None and o.trace.complete, o.trace.incomplete
    pids = [{p.pid for p in o.trace.processes} for o in outcomes]  # type: ignore[union-attr]
    assert len(pids[0] & pids[1] & pids[2]) == 1  # the worker's


def test_a_warm_run_that_times_out_is_killed_and_the_worker_goes_on(modules, runner):
    t0 = time.monotonic()
    slow = run(runner, modules, "sleeper", timeout=1.0)
    assert slow.status == "timeout"
    assert time.monotonic() - t0 < 20
    after = run(runner, modules, "readsome")
    assert after.exit_code == 3 and after.log == b"value 1 hello\n"


def test_a_forked_child_left_running_makes_the_warm_trace_incomplete(modules, runner):
    outcome = run(runner, modules, "leaves")
    assert outcome.status == "passed"
    assert outcome.trace is not None and not outcome.trace.complete
    reasons = [i.reason for i in outcome.trace.incomplete]
    assert "still running after the command exited" in reasons


def test_a_worker_whose_inputs_changed_does_not_fork(modules, runner):
    spec = WarmSpec.of([PY, "-m", "readsome"], ("warmdep",), str(modules), env_for(modules))
    assert spec is not None
    worker = Worker(spec)
    try:
        assert worker.start(), worker.why
        assert str(modules / "warmdep.py") in worker.snapshot
        assert worker.changed() is None
        time.sleep(0.01)
        (modules / "warmdep.py").write_text("VALUE = 2\n")
        assert worker.changed() == str(modules / "warmdep.py")
        with pytest.raises(WarmUnavailable):
            worker.spawn([PY, "-m", "readsome"], cwd=str(modules), env={}, stdout=sys.stdout)
    finally:
        worker.close()
    # The runner then starts a new worker, which sees the new value.
    assert run(runner, modules, "readsome").log == b"value 2 hello\n"


def test_a_worker_that_cannot_import_its_modules_is_not_used(modules, runner):
    (modules / "warmdep.py").write_text("raise RuntimeError('broken at import')\n")
    outcome = run(runner, modules, "readsome")
    # Run fresh: the import fails in the run itself, as it would without a worker.
    assert outcome.status == "failed"
    assert b"broken at import" in outcome.log
    assert outcome.trace is not None and outcome.trace.complete


def test_a_folder_the_worker_only_looked_up_may_change_a_listed_one_may_not(tmp_path):
    # Python looks up the folders above its interpreter (/tmp, a home folder), whose
    # entries change all the time: like validation, the worker holds only that they are
    # folders. A folder it listed (a sys.path entry) holds its entries.
    mods = write_tree(
        tmp_path / "mods",
        {
            "warmdep.py": "import os\nos.path.isdir('looked')\nos.listdir('listed')\n",
            "looked/a.txt": "",
            "listed/a.txt": "",
        },
    )
    time.sleep(0.1)
    spec = WarmSpec.of([PY, "-m", "readsome"], ("warmdep",), str(mods), env_for(mods))
    assert spec is not None
    worker = Worker(spec)
    try:
        assert worker.start(), worker.why
        (mods / "looked" / "b.txt").write_text("")
        assert worker.changed() is None
        (mods / "listed" / "b.txt").write_text("")
        assert worker.changed() == str(mods / "listed")
    finally:
        worker.close()


def test_the_worker_modules_import_only_the_standard_library():
    """The worker runs in the target's interpreter, which cannot import memotest: its
    modules (and those plugins ship for it) import the standard library, and each other
    by relative imports only; they are compiled as Python 3.10."""
    import ast

    import memotest.worker
    from memotest.tracer.warm.command import extension_modules

    folder = Path(memotest.worker.__file__).parent
    own = {p.stem for p in folder.glob("*.py")}
    files = [*folder.glob("*.py"), *(Path(str(m.__file__)) for m in extension_modules())]
    assert any(f.name == "worker_side.py" for f in files)  # the pytest plugin's
    outside = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 10))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.ImportFrom):
                module = node.module.split(".")[0] if node.module else None
                names = [module] if module else [alias.name for alias in node.names]
                outside += [f"{path.name}: .{n}" for n in names if n not in own]
                continue
            else:
                continue
            tops = {n.split(".", 1)[0] for n in names}
            outside += [f"{path.name}: {t}" for t in sorted(tops - sys.stdlib_module_names)]
    assert outside == []
