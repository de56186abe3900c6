"""Python's yes-or-no path probes are untimed (``memotest/worker/untimed.py``): a file a
pytest run only asked "is it there, is it a file" about is out of the modification-time
order, so a checkout that writes it in another clock tick does not re-run the run.

The attacks come first: pytest targets (in the warm worker, under the real shim) that
obtain two project files' mtimes through each Python entry point that hands them back, or
that probe a file and then stat it for its time, or that run a shell's ``test -nt``: a
flip of the order must re-run each. Then the narrowing: a target that only probes the same
two files replays after the same flip.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import aged_pair, build_statuses, flip

TOML = """
[settings]
pass_env = ["PATH", "HOME", "LANG", "PYTHON*"]
"""
#: How the test file runs: a ``--pytest`` target, forked from the warm worker (its probes
#: untimed from the worker's start); or a targets file's plain ``python -m pytest``
#: command, a fresh process (its probes untimed from ``memotest_walk``'s import on:
#: ``plugins/memotest_pytest/plain.py``).
HOW = {
    "warm": ("pytest:tests/test_it.py", ("--pytest", "tests")),
    "plain": ("unit:tests/test_it.py", ()),
}
PLAIN = """
[targets.unit]
foreach = "tests/test_*.py"
command = "python -m pytest -q {path}"
"""

#: Each body is a test of ``tests/test_it.py`` that passes while ``gen`` is newer than
#: ``src`` (both files of the project, an hour apart) and fails once ``src`` is newer.
ATTACKS = {
    "getmtime": "assert os.path.getmtime('gen') > os.path.getmtime('src')",
    "path-stat": "assert Path('gen').stat().st_mtime > Path('src').stat().st_mtime",
    "os-stat": "assert os.stat('gen').st_mtime_ns > os.stat('src').st_mtime_ns",
    # a probe first (recorded untimed), then a stat of the same files for their times
    "probe-then-stat": (
        "assert os.path.exists('gen') and Path('src').is_file()\n"
        "    assert os.stat('gen').st_mtime_ns > os.stat('src').st_mtime_ns"
    ),
    "stat-then-probe": (
        "newer = os.stat('gen').st_mtime_ns > os.stat('src').st_mtime_ns\n"
        "    assert os.path.isfile('gen') and Path('src').exists() and newer"
    ),
    # a probe's stat and a comparison's in one call: a shell's, in a child of the worker
    "shell-test-nt": (
        "assert os.path.exists('gen') and os.path.exists('src')\n"
        "    assert subprocess.run(['sh', '-c', 'test gen -nt src']).returncode == 0"
    ),
    # another thread probes the files over and over while this one compares their times
    "threads": (
        "stop = []\n"
        "    def probe():\n"
        "        while not stop:\n"
        "            os.path.exists('gen'), Path('src').is_file()\n"
        "    t = threading.Thread(target=probe); t.start()\n"
        "    try:\n"
        "        assert os.lstat('gen').st_mtime_ns > os.lstat('src').st_mtime_ns\n"
        "    finally:\n"
        "        stop.append(1); t.join()"
    ),
}

#: Only probes of the two files: their order is nowhere in what the test could decide by.
PROBES = (
    "assert os.path.exists('gen') and os.path.isfile('src') and not os.path.isdir('gen')\n"
    "    assert Path('gen').is_file() and Path('src').exists() and not Path('src').is_dir()\n"
    "    assert not os.path.islink('gen') and os.path.lexists('src')\n"
    "    assert not Path('gen').is_symlink() and not os.path.samefile('gen', 'src')"
)


def project(root: Path, bodies: dict[str, str], how: str) -> Path:
    """One test file per body (``tests/test_NAME.py``, each its own target); ``gen`` an
    hour older than now, ``src`` two: ``gen`` is the newer."""
    (root / "tests").mkdir(parents=True)
    (root / "memotest.toml").write_text(TOML + (PLAIN if how == "plain" else ""))
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:benchmark\n")
    for name, body in bodies.items():
        (root / "tests" / f"test_{name.replace('-', '_')}.py").write_text(
            "import os, subprocess, threading\nfrom pathlib import Path\n\n\n"
            f"def test_it():\n    {body}\n"
        )
    aged_pair(root)
    return root


def target(how: str, name: str) -> str:
    return HOW[how][0].replace("test_it", f"test_{name.replace('-', '_')}")


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PATH"] = os.path.dirname(sys.executable) + os.pathsep + out.get("PATH", "")
    return out


def statuses(root: Path, how: str, only: str = "") -> dict[str, str]:
    """The statuses of a build of every target, or of target ``only`` alone."""
    args = HOW[how][1]
    if only:  # a warm run's target is named by its file, after --pytest
        args = ("--pytest", only.split(":", 1)[1]) if how == "warm" else (only,)
    _code, out, got = build_statuses(root, *args, "-v", env=env())
    assert got, out
    return got


#: The warm runs try every attack; the plain ones the main entry points.
ATTACKED = {
    "warm": sorted(ATTACKS),
    "plain": ["getmtime", "os-stat", "probe-then-stat", "shell-test-nt"],
}


@pytest.mark.parametrize("how", sorted(HOW))
def test_a_comparison_of_times_in_a_pytest_run_reruns_when_the_order_flips(tmp_path, how):
    """Each attack is a test file of its own (its own target and record): a flip of the
    order re-runs each, and fails it. Beside them, a test file that only probes the same
    two files (``probes``) replays after the flip, and runs again when a file it probed
    is deleted."""
    bodies = {name: ATTACKS[name] for name in ATTACKED[how]}
    root = project(tmp_path / "p", {**bodies, "probes": PROBES}, how)
    attacks, probes = [target(how, name) for name in bodies], target(how, "probes")
    assert statuses(root, how) == {**dict.fromkeys(attacks, "passed"), probes: "passed"}
    assert statuses(root, how) == {**dict.fromkeys(attacks, "cached"), probes: "cached"}
    flip(root)
    assert statuses(root, how) == {**dict.fromkeys(attacks, "failed"), probes: "cached"}
    (root / "gen").unlink()  # what the probes did see is still held
    # (the probes' file alone: the failed attacks would only run and fail again)
    assert statuses(root, how, probes) == {probes: "failed"}


#: The probes of each kind, then a stat for times: under the shim, the probed files are
#: ``S`` (found, no time) and the stat'ed one ``T``.
SNIPPET = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import untimed
assert untimed.install()
assert os.path.exists('a') and os.path.isfile('b') and not os.path.isdir('c')
assert not os.path.islink('d') and os.path.lexists('e') and not os.path.samefile('f', 'a')
assert Path('g').exists() and Path('h').is_file() and not Path('i').is_dir()
assert not Path('j').is_symlink() and not Path('k').is_fifo()
os.stat('timed')
"""
PROBED = "abcdefghijk"
#: The interpreters the wrapping is written for: each one's os.path and pathlib differ
#: (genericpath's islink from 3.12, lexists from 3.13; pathlib's PathBase from 3.13).
VERSIONS = ("3.10", "3.11", "3.12", "3.13")


def pythons() -> list[str]:
    """This Python, and each of :data:`VERSIONS` found that runs: pyenv's own builds first
    (on ``PATH``, ``python3.X`` may be a pyenv shim that only says where it is)."""
    found = {sys.executable}
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    for v in VERSIONS:
        candidates = sorted(root.glob(f"versions/{v}.*/bin/python{v}"))
        candidates += [Path(p)] if (p := shutil.which(f"python{v}")) else []
        for python in candidates:
            if subprocess.run([python, "-c", ""], capture_output=True).returncode == 0:
                found.add(str(python))
                break
    return sorted(found)


@pytest.mark.parametrize("python", pythons())
def test_each_python_s_probes_are_untimed_and_its_stats_timed(tmp_path, python):
    from memotest.tracer.shim import shim_path

    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "log").write_bytes(b"")
    (trace / "status").write_bytes(b"0")
    for name in [*PROBED, "timed"]:
        (tmp_path / name).write_text(name)
    shim = shim_path()
    env = dict(os.environ, MEMOTEST_TRACE_DIR=str(trace), MEMOTEST_SHIM=shim, LD_PRELOAD=shim)
    worker = Path(__file__).resolve().parents[1] / "memotest" / "worker"
    proc = subprocess.run(
        [python, "-c", SNIPPET, str(worker)], cwd=tmp_path, env=env, capture_output=True
    )
    assert proc.returncode == 0, proc.stderr.decode()
    fields = (trace / "log").read_bytes().split(b"\0")
    ops: dict[str, set[str]] = {}
    for head, path in itertools.pairwise(fields):
        if head[:1] in (b"S", b"T", b"p") and os.path.dirname(path) == os.fsencode(tmp_path):
            ops.setdefault(os.path.basename(path).decode(), set()).add(head[:1].decode())
    # yes-or-no probes write ``p``; samefile (f, and a again), whose answer is the two
    # files' identity, is untimed only (``S``)
    probed = {name: {"p"} for name in PROBED}
    assert ops == {**probed, "a": {"p", "S"}, "f": {"S"}, "timed": {"T"}}
