"""Start-up cost of memotest's commands: the CPU and wall time of a no-op ``memotest build``.

A no-op build (every target cached) is what the test suite and a developer's edit loop run
most, and most of its cost is memotest's own start: importing modules, loading the
plugins, reading the targets file. This benchmark times, each as a fresh subprocess
(``python -m memotest ...``, the way the tests and CI run it):

- ``--version`` and ``build --help`` (no targets file read);
- a no-op ``build`` of a copy of ``examples/quickstart`` (4 targets: pytest files and a
  compileall), after warm-up builds that recorded every target;
- a no-op ``build`` of a generated project of 200 targets (``command = "true"``, each
  reading a few files of its own);
- plain ``python -c pass``, the floor.

Each row is measured without bytecode (``PYTHONDONTWRITEBYTECODE=1`` and memotest's
``__pycache__`` folders deleted: every start compiles memotest's modules, as this machine's
shell does) and with it (as CI does). The CPU time is the child's user + system time
(``os.wait4``). Each figure is the minimum over ``--repeat`` runs (5), with the median
beside it: on a shared machine the others measure the load. The load average is printed.

Run: ``python benchmarks/noop_start.py [--repeat N] [--quick]``. ``--quick`` skips the
200-target project. Exit status 0 when the quickstart no-op's CPU (bytecode written) is at
most the goal, 0.15 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_CPU_S = 0.15
N_TARGETS = 200


def run_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s, exit status, stdout), CPU from ``wait4`` of the child."""
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.chdir(cwd)
            os.close(r)
            os.dup2(w, 1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.execve(cmd[0], cmd, env)
        finally:
            os._exit(127)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def environment(bytecode: bool) -> dict[str, str]:
    """The environment of a mode; without bytecode, memotest's own ``__pycache__`` folders
    are deleted first (a ``.pyc`` written earlier would still be read)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for top in ("memotest", "plugins"):
            for cache in (REPO / top).rglob("__pycache__"):
                shutil.rmtree(cache, ignore_errors=True)
    return env


def make_project(root: Path) -> None:
    """200 targets, each reading a file of its own and a shared one."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "shared.txt").write_text("shared\n")
    lines = ['[settings]\npass_env = ["PATH", "HOME", "LANG", "PYTHON*"]\n']
    for i in range(N_TARGETS):
        (root / "data" / f"f{i:03d}.txt").write_text(f"{i}\n")
        lines += [f"[targets.t{i:03d}]", f'command = "cat data/f{i:03d}.txt data/shared.txt"', ""]
    (root / "memotest.toml").write_text("\n".join(lines))


def warm(cwd: Path, env: dict[str, str], n: int) -> None:
    """Builds until a build reports every one of the ``n`` targets cached."""
    cmd = [sys.executable, "-m", "memotest", "build", "-j2"]
    for _ in range(4):
        _w, _c, code, out = run_once(cmd, cwd, env)
        last = out.strip().splitlines()[-1:] or [""]
        if code == 0 and f"{n} cached" in last[0]:
            return
    raise SystemExit(f"{cwd}: no no-op after 4 builds: {last[0]!r}")


def measure(name: str, cmd: list[str], cwd: Path, env: dict[str, str], repeat: int) -> float:
    runs = [run_once(cmd, cwd, env) for _ in range(repeat)]
    bad = [r for r in runs if r[2] not in (0,)]
    walls = [r[0] for r in runs]
    cpus = [r[1] for r in runs]
    print(
        f"  {name:<28} wall {min(walls):.3f} s (median {statistics.median(walls):.3f})   "
        f"CPU {min(cpus):.3f} s (median {statistics.median(cpus):.3f})"
        + (f"   exit {bad[0][2]}!" if bad else ""),
        flush=True,
    )
    return min(cpus)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, metavar="N")
    ap.add_argument("--quick", action="store_true", help="skip the 200-target project")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memotest-start-"))
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()}")
    quick_cpu = 0.0
    try:
        quick = tmp / "quickstart"
        shutil.copytree(REPO / "examples" / "quickstart", quick)
        many = tmp / "many"
        if not args.quick:
            make_project(many)
        py = [sys.executable]
        build = [*py, "-m", "memotest", "build"]
        for bytecode in (False, True):
            env = environment(bytecode)
            print(f"bytecode {'written (as CI)' if bytecode else 'not written'}:", flush=True)
            run_once([*py, "-m", "memotest", "--version"], REPO, env)  # compile once
            measure("python -c pass", [*py, "-c", "pass"], REPO, env, args.repeat)
            measure("--version", [*py, "-m", "memotest", "--version"], REPO, env, args.repeat)
            measure("build --help", [*build, "--help"], REPO, env, args.repeat)
            warm(quick, env, 4)
            cpu = measure("no-op build, quickstart (4)", build, quick, env, args.repeat)
            if bytecode:
                quick_cpu = cpu
            if not args.quick:
                warm(many, env, N_TARGETS)
                measure(f"no-op build, {N_TARGETS} targets", build, many, env, args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = quick_cpu <= GOAL_CPU_S
    print(
        f"quickstart no-op CPU {quick_cpu:.3f} s  [{'PASS' if ok else 'FAIL'} goal <= {GOAL_CPU_S}]"
        f"; load average {os.getloadavg()}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
