"""Shared fixtures: the memotest CLI run as a real process, and compiled C test programs."""

from __future__ import annotations

import compileall
import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import forked_cli
import pytest
from cpu_record import register as register_cpu_recorder

# The suite runs as CI's machines do, with bytecode not written: a warm worker whose own
# start writes its modules' `.pyc` files (a tree never imported before) changed a folder it
# listed while it started and is refused once (the run goes fresh: a cost, noted in
# docs/limits.md), which the warm tests would read as a failure. The cases about bytecode
# written set their own environment (test_codelevel_seen's `.pyc` case, test_exclusive_creates).
os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
# The suite's own processes too, from here on: a module imported later, in a test or in a
# build forked from this process (forked_cli.py), under pytest's assertion rewriting (the
# plugin's `narrow.py`), wrote its `.pyc` mid-suite in a fresh clone. A worker of another
# test's build that read that folder while it started was refused (CI, twice: a 3.12 core
# test, test_preload's shadows test), and its runs went fresh.
if os.environ["PYTHONDONTWRITEBYTECODE"]:
    sys.dont_write_bytecode = True

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "shim_programs"
REPO = HERE.parent


def pytest_configure(config: pytest.Config) -> None:
    # MEMOTEST_TEST_CPU=PATH: each test's CPU appended to PATH (tests/cpu_record.py).
    register_cpu_recorder(config)
    if not hasattr(config, "workerinput"):  # once, before any xdist worker starts
        compile_own_modules()


def pytest_unconfigure(config: pytest.Config) -> None:
    forked_cli.stop_server()


def compile_own_modules() -> None:
    """Writes the bytecode of memotest's own modules (the editable install's tree) before
    the suite runs. With bytecode not written, every process the tests start (each
    ``python -m memotest``, warm worker, tox exec, make shell) compiled them from source,
    ~40% of a ``memotest build``'s CPU on a fresh checkout (0.33 s against 0.20 s), until a
    test that writes bytecode happened to write some of them midway through the suite."""
    for tree in ("memotest", "plugins"):
        compileall.compile_dir(REPO / tree, quiet=2)


#: Code noting (a Python file held by the code of it that ran) needs Python 3.11+: on 3.10
#: nothing notes the code and every file is held whole (docs/limits.md).
needs_code_noting = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="Python 3.10 notes no code: files are held whole"
)


def memotest(
    *args: str,
    cwd: str | os.PathLike | None = None,
    env: dict | None = None,
    timeout: float = 120,
    input: bytes | None = None,
) -> subprocess.CompletedProcess:
    """Runs ``python -m memotest ARGS`` and captures its output (bytes): forked from a
    process that has imported memotest where Python's start would be the same
    (``forked_cli.py``), else in a fresh interpreter."""
    forked = forked_cli.run(args, cwd, env, timeout, input)
    if forked is not None:
        return forked
    return subprocess.run(
        [sys.executable, "-m", "memotest", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=timeout,
        input=input,
    )


def python_without_memotest(venv: Path) -> Path:
    """A venv at ``venv`` whose Python imports this one's packages (pytest, its plugins)
    but not memotest's: the paths are plain entries of a ``.pth`` file there, so the
    ``.pth`` files they hold (memotest's editable install) are not processed. Its python."""
    import site
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    base = {"base": str(venv), "platbase": str(venv)}
    purelib = Path(sysconfig.get_path("purelib", vars=base))
    (purelib / "outside.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    python = venv / "bin" / "python"
    probe = "import pytest, importlib.util as u; print(u.find_spec('memotest_pytest') is None)"
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    assert found.stdout.strip() == "True", found.stdout + found.stderr
    return python


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Writes ``files`` (relative path: text, dedented) under ``root``; returns ``root``."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def build_statuses(
    cwd: Path, *args: str, env: dict | None = None, report: Path | None = None
) -> tuple[int, str, dict[str, str]]:
    """Runs ``memotest build --json-report ... ARGS`` in ``cwd``: its exit status, its
    output, and each target's status from the report (written beside ``cwd``)."""
    report = report or cwd.parent / f"{cwd.name}-report.json"
    proc = memotest("build", "--json-report", str(report), *args, cwd=cwd, env=env)
    out = proc.stdout.decode() + proc.stderr.decode()
    statuses = BuildStatuses(out)
    if report.exists():
        statuses.update((t["name"], t["status"]) for t in json.loads(report.read_text())["targets"])
        report.unlink()
    return proc.returncode, out, statuses


def trace(*cmd: str, cwd: str | os.PathLike | None = None, env: dict | None = None) -> dict:
    """Traces ``cmd`` with ``memotest trace`` and returns the parsed JSON."""
    proc = memotest("trace", "--", *cmd, cwd=cwd, env=env)
    assert proc.returncode != 2, proc.stderr.decode()
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def cprog(tmp_path_factory):
    """Compiles ``tests/shim_programs/NAME.c`` once per run; returns its path. Under xdist
    the workers of one run share the programs (a folder beside their own base folders,
    under a lock): each is compiled once, not once per worker."""
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the C test programs")
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cprogs"
    out.mkdir(exist_ok=True)
    built: dict[tuple[str, bool], str] = {}

    def build(name: str, static: bool = False) -> str:
        key = (name, static)
        if key not in built:
            exe = out / (name + ("-static" if static else ""))
            with open(out / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not exe.exists():
                    part = exe.with_name(exe.name + ".part")
                    cmd = ["gcc", "-O1", "-pthread", "-o", str(part), str(PROGRAMS / f"{name}.c")]
                    if static:
                        cmd.insert(1, "-static")
                    proc = subprocess.run(cmd, capture_output=True, text=True)
                    assert proc.returncode == 0, proc.stderr
                    part.rename(exe)
            built[key] = str(exe)
        return built[key]

    return build


def plugin_site(root: Path) -> Path:
    """A folder for PYTHONPATH: a ``sitecustomize`` (imported by Python at start-up, so by
    the worker only) and a pytest plugin installed through an entry point, whose asserts
    pytest rewrites."""
    return write_tree(
        root,
        {
            "sitecustomize.py": "import builtins\nbuiltins.SITE_VALUE = 1\n",
            "myplug.py": """
                import pytest

                @pytest.fixture
                def plugged():
                    value = 2
                    assert value == 3
            """,
            "myplug-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: myplug\nVersion: 1.0\n",
            "myplug-1.0.dist-info/RECORD": "myplug.py,,\n",
            "myplug-1.0.dist-info/entry_points.txt": "[pytest11]\nmyplug = myplug\n",
        },
    )


#: An hour in nanoseconds (the mtime-order tests' unit).
HOUR = 3_600 * 10**9


def aged_pair(root: Path) -> None:
    """Writes ``src`` two hours old and ``gen`` one hour old: ``gen`` is the newer."""
    for name, age in (("src", 2 * HOUR), ("gen", HOUR)):
        (root / name).write_text(name + "\n")
        now = time.time_ns()
        os.utime(root / name, ns=(now - age, now - age))


def flip(root: Path) -> None:
    """Makes ``src`` of :func:`aged_pair` the newer, content kept."""
    now = time.time_ns() - HOUR // 2
    os.utime(root / "src", ns=(now, now))


#: What the suite adds to ``PYTEST_ADDOPTS`` for the pytest runs its tests start: no
#: pytest-benchmark (the test extra installs it) and no Hypothesis plugin (an engineer's
#: venv may have it: ~0.7 s a pytest). pytest-benchmark's plugin, autoloaded by every
#: pytest a target, a warm worker or a collection starts, cost a fifth of the CPU of
#: pytest-heavy files (test_select_tests, test_listings, test_warm: 88.2 CPU-s against
#: 72.1, load ~10; docs/benchmarks.md, "The suite's time, trimmed"), and made the suite's
#: results depend on what the venv has. The tests about what they do (pytest-benchmark's
#: ``.benchmarks`` folder, Hypothesis's caches) load them by name, or take
#: :func:`host_pytest_plugins`.
NO_HOST_PLUGINS = "-p no:benchmark -p no:hypothesispytest"
_ADDOPTS = os.environ.get("PYTEST_ADDOPTS")


@pytest.fixture(autouse=True, scope="session")
def _targets_without_host_plugins():
    """Every process a test starts (``os.environ``, at each call) gets
    :data:`NO_HOST_PLUGINS`; a session fixture, so the suite's own pytest (and xdist's
    controller, which starts the workers) is left as it was started."""
    os.environ["PYTEST_ADDOPTS"] = f"{_ADDOPTS} {NO_HOST_PLUGINS}" if _ADDOPTS else NO_HOST_PLUGINS
    yield
    if _ADDOPTS is None:
        os.environ.pop("PYTEST_ADDOPTS", None)
    else:
        os.environ["PYTEST_ADDOPTS"] = _ADDOPTS


@pytest.fixture
def host_pytest_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest runs of this test load the venv's plugins as a user's would."""
    if _ADDOPTS is None:
        monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    else:
        monkeypatch.setenv("PYTEST_ADDOPTS", _ADDOPTS)


class BuildStatuses(dict):
    """Each target's status from a build, and the build's output (``.out``): an assertion
    that compares it with ``==`` shows that output (:func:`pytest_assertrepr_compare`), so
    that a status other than the one expected says why (with ``-v``, the reason of each
    run and why a warm worker was not used). Helpers that make their own dict of the
    statuses pass ``out`` on: ``BuildStatuses(out, {...})``."""

    def __init__(self, out: str, statuses: dict[str, str] | None = None) -> None:
        super().__init__(statuses or {})
        self.out = out


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: object, right: object):
    built = [s for s in (left, right) if isinstance(s, BuildStatuses)]
    if op != "==" or not built or not isinstance(left, dict) or not isinstance(right, dict):
        return None
    lines = [f"{left!r} == {right!r}"]
    for name in sorted(set(left) | set(right)):
        if left.get(name) != right.get(name):
            lines.append(f"  {name}: {left.get(name)!r} != {right.get(name)!r}")
    lines.append("the build's output:")
    lines.extend(f"  {line}" for line in built[0].out.splitlines())
    return lines


def outside(marker: Path, go: Path, act, done: threading.Event) -> None:
    """A process outside the build (a thread of the test, which no tracer sees): waits until
    the run says it started (``marker``), does ``act``, then lets the run go on (a line
    written to the fifo ``go``, once the run opened it: never, if it was replayed)."""
    while not marker.exists() and not done.is_set():
        time.sleep(0.005)
    try:
        if act is not None and not done.is_set():
            act()
    finally:
        while not done.is_set():
            try:
                fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.005)
                continue
            os.write(fd, b"\n")
            os.close(fd)
            break


def start_up_lookups(lib: Path) -> list[str]:
    """The names this venv's interpreter start-up looks for in a ``PYTHONPATH`` folder and
    does not find, among those a watch might miss (not imported in the end)."""
    code = "import sys; print(' '.join(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-vv", "-c", code],
        env={**os.environ, "PYTHONPATH": str(lib)},
        capture_output=True,
    )
    tried = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith(f"# trying {lib}{os.sep}") and line.endswith(".py"):
            tried.add(line.rsplit(os.sep, 1)[1][: -len(".py")])
    return sorted(tried - set(proc.stdout.decode().split()) - {"sitecustomize", "usercustomize"})
