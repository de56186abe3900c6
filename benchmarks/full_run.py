"""Where a full run's time goes: memotest with every target stale against one-process pytest.

A full run is the first revision of the replay (``benchmarks/replay.py``): no store, so
every test file is a target that runs, and no preload book (``.memotest/warm.json``). For
one replay project, its latest listed release is laid into a working folder (as the replay
does, with the replay's venv in ``.bench/`` and its installed metadata), and measured:

* **pytest**: ``python -m pytest -q -p no:cacheprovider TESTS``, one process (the base);
* **pytest -n 2**: the same with pytest-xdist's two workers, what a user with two cores
  runs instead (no record kept: the floor of any tool running the tests in two processes);
* **per file**: the same, one process per test file (RetestAll): minus pytest, over the
  files, it is what starting Python, pytest, its plugins and the conftests costs per file;
* **collection**: pytest's collection of TESTS alone (``--collect-only``);
* **memotest**: ``memotest build -jN --pytest TESTS`` from an empty store, as is (warm
  workers, code noting), with ``--whole-files`` (no code, listings or sections noted: the
  cost of noting them), and with ``--no-warm`` (every target a fresh traced process: what
  the warm worker saves). Each build's time is split into what is before its first target
  (memotest's start, its pytest collection, the worker's start), the targets' own
  durations (as the JSON report has them: the forked run under the tracer, and recording
  its inputs), and the rest (scheduling gaps, the store, the reports).

Per file, it also prints what a forced memotest run costs beyond the same file's tests
inside the one pytest session: the target's duration (from the -j1 build's JSON report)
minus the file's time in that session (``benchmarks/pytest_plugins/file_times.py``: the
collection of its module and the run of its items), median over the files.

Each figure is one measurement: wall seconds and the CPU seconds of the processes it
started (``RUSAGE_CHILDREN``), which a busy machine changes less. Run::

    python benchmarks/full_run.py                        # oslo.utils and structlog, -j1 -j2
    python benchmarks/full_run.py --projects structlog --jobs 2
    python benchmarks/full_run.py --quick --checkout click=/path/to/click --venv VENV

``--checkout NAME=DIR`` measures a local checkout (a ``git archive`` of a repository,
tests in ``tests/``, the package in ``src/`` or at the top) with the venv ``--venv``,
instead of a replay project's release; ``--quick`` leaves out pytest once per file and
the ``--whole-files`` and ``--no-warm`` builds. The builds fork from configured pytest
workers (memotest's default) unless ``--unconfigured`` is given
(``MEMOTEST_PYTEST_CONFIGURED=0``).

Set ``MEMOTEST_BENCH_WORK`` as for the replay (the working folders go under it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay

DEFAULT = ("oslo.utils", "structlog")
PLUGINS = Path(__file__).resolve().parent / "pytest_plugins"
#: Variables of memotest's own process in the builds (``--unconfigured``).
EXTRA_ENV: dict[str, str] = {}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and children's CPU seconds of ``cmd``, and its output."""
    c0, t0 = cpu(), time.monotonic()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace", check=False
    )
    return time.monotonic() - t0, cpu() - c0, proc.stdout + proc.stderr


def lay(project: replay.Project, work: Path) -> Path:
    """The project's latest release in ``work/PROJECT``, as the replay's first revision."""
    lane = replay.Lane(work / project.name)
    shutil.rmtree(lane.root, ignore_errors=True)
    lane.root.mkdir(parents=True)
    version = project.releases[-1]
    src_root = replay.extracted(project.name, version)
    meta = replay.installed_metadata(src_root) if project.metadata else None
    lane.checkout(replay.release_files(src_root), meta, re.sub(r"[-.]+", "_", project.name).lower())
    return lane.root


def build(venv: Path, lane: Path, tests: str, env: dict, jobs: int, *extra: str) -> dict:
    """One memotest build from an empty store, split as the module doc says."""
    shutil.rmtree(lane / ".memotest", ignore_errors=True)
    report = lane.parent / "full-run-report.json"
    report.unlink(missing_ok=True)
    cmd = [str(venv / "bin" / "memotest"), "build", f"-j{jobs}", *extra]
    cmd += ["--json-report", str(report), "--pytest", tests]
    wall, used, out = measure(cmd, lane, dict(env, **EXTRA_ENV))
    if not report.exists():
        return {"wall": wall, "cpu": used, "error": out[-500:]}
    data = json.loads(report.read_text())
    targets = sum(t.get("duration") or 0 for t in data["targets"])
    duration = data["summary"].get("duration") or 0.0
    return {
        "per_target": {t["name"]: t.get("duration") or 0.0 for t in data["targets"]},
        "wall": wall,
        "cpu": used,
        "before_build": wall - duration,
        "targets": targets,
        # with -jN the targets overlap: their durations over N is the slots' busy time
        "gaps": duration - targets / jobs,
        "n": len(data["targets"]),
    }


def lay_checkout(source: Path, work: Path, name: str) -> Path:
    """A copy of the checkout ``source`` in ``work/NAME``."""
    lane = work / name
    shutil.rmtree(lane, ignore_errors=True)
    shutil.copytree(source, lane, symlinks=True, ignore=shutil.ignore_patterns(".memotest"))
    return lane


def run(
    name: str,
    jobs: list[int],
    work: Path,
    checkout: Path | None = None,
    venv: Path | None = None,
    quick: bool = False,
) -> dict:
    if checkout is None:
        project = replay.PROJECTS[name]
        venv = venv or replay.venv(project)
        lane = lay(project, work)
        release = project.releases[-1]
    else:
        root = "src" if (checkout / "src").is_dir() else "."
        project = replay.Project(name, root, "tests", (), (), "a local checkout", metadata=False)
        assert venv is not None, "--checkout needs --venv"
        lane = lay_checkout(checkout, work, name)
        release = "checkout"
    py = str(venv / "bin" / "python")
    env = replay.environment(project, lane, venv)
    col = replay.collect(py, lane, project.tests, env)
    files = col["files"]
    out: dict = {"project": name, "release": release, "files": len(files)}
    base = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    # Once unmeasured: Python's and pytest's caches of compiled (rewritten) modules, as a
    # developer's checkout has them.
    measure([*base, project.tests], lane, env)
    times = lane.parent / f"{name}-file-times.json"
    timed_env = dict(env, FILE_TIMES_OUT=str(times))
    timed_env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(PLUGINS)])
    wall, used, _ = measure([*base, "-p", "file_times", project.tests], lane, timed_env)
    out["pytest"] = {"wall": wall, "cpu": used}
    out["in_session"] = json.loads(times.read_text()) if times.exists() else {}
    wall, used, _ = measure([*base, "-n", "2", project.tests], lane, env)
    out["xdist"] = {"wall": wall, "cpu": used}
    if not quick:
        walls, cpus = 0.0, 0.0
        for rel in files:
            wall, used, _ = measure([*base, rel], lane, env)
            walls, cpus = walls + wall, cpus + used
        out["per_file"] = {"wall": walls, "cpu": cpus}
    wall, used, _ = measure([*base, "--collect-only", project.tests], lane, env)
    out["collection"] = {"wall": wall, "cpu": used}
    for n in jobs:
        out[f"j{n}"] = build(venv, lane, project.tests, env, n)
        if n == 1 and not quick:
            out["j1_whole"] = build(venv, lane, project.tests, env, 1, "--whole-files")
            out["j1_cold"] = build(venv, lane, project.tests, env, 1, "--no-warm")
    return out


def extra_per_file(r: dict) -> list[float]:
    """Per test file, the -j1 target's duration minus the file's time in one session."""
    targets = (r.get("j1") or {}).get("per_target") or {}
    inside = r.get("in_session") or {}
    out = []
    for name, duration in targets.items():
        rel = name.split(":", 1)[1]
        if rel in inside:
            out.append(duration - inside[rel])
    return out


def show(r: dict) -> None:
    p, n = r["pytest"], r["files"]
    print(f"\n{r['project']} {r['release']}: {n} test files (wall s / CPU s; x = wall / pytest's)")

    def line(label: str, m: dict, note: str = "") -> None:
        x = m["wall"] / p["wall"] if p["wall"] else float("nan")
        print(f"  {label:<34} {m['wall']:6.2f} / {m['cpu']:6.2f}  {x:5.2f}x  {note}")

    line("pytest (one process)", p)
    if "per_file" in r:
        start = (r["per_file"]["wall"] - p["wall"]) / n
        line("pytest, one process per file", r["per_file"], f"start-up {start:.2f} s per file")
    if "xdist" in r:
        line("pytest -n 2 (pytest-xdist)", r["xdist"])
    line("pytest --collect-only", r["collection"])
    for key, label in (
        ("j1", "memotest -j1"),
        ("j1_whole", "memotest -j1 --whole-files"),
        ("j1_cold", "memotest -j1 --no-warm"),
        ("j2", "memotest -j2"),
    ):
        m = r.get(key)
        if not m:
            continue
        if "error" in m:
            print(f"  {label:<34} failed: {m['error']}")
            continue
        line(
            label,
            m,
            f"before the 1st target {m['before_build']:.2f} | targets {m['targets']:.2f} "
            f"({m['targets'] / m['n']:.2f}/target) | gaps {m['gaps']:.2f}",
        )
    extra = extra_per_file(r)
    if extra:
        print(
            f"  per file, a forced memotest -j1 run minus its tests in one pytest session: "
            f"median {statistics.median(extra) * 1000:.0f} ms (min {min(extra) * 1000:.0f}, "
            f"max {max(extra) * 1000:.0f}; {len(extra)} files)"
        )
    print(f"  load average during the project: {r.get('load', '?')}")


def summary(results: list[dict]) -> None:
    """The ratios to one-process pytest's wall time, project by project and their median."""
    lanes = [("xdist", "-n 2"), ("j1", "-j1"), ("j2", "-j2")]
    ratios: dict[str, list[float]] = {key: [] for key, _ in lanes}
    print("\nwall / one-process pytest's:  " + "  ".join(f"{label:>6}" for _, label in lanes))
    for r in results:
        cells = []
        for key, _ in lanes:
            m = r.get(key) or {}
            if "wall" in m and r["pytest"]["wall"]:
                ratios[key].append(m["wall"] / r["pytest"]["wall"])
                cells.append(f"{ratios[key][-1]:5.2f}x")
            else:
                cells.append(f"{'-':>6}")
        print(f"  {r['project']:<28} " + "  ".join(cells))
    medians = [f"{statistics.median(v):5.2f}x" if v else f"{'-':>6}" for v in ratios.values()]
    print(f"  {'median project':<28} " + "  ".join(medians))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--projects", nargs="+", default=list(DEFAULT), metavar="NAME")
    ap.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--venv", type=Path, default=None, help="the venv of --checkout projects")
    ap.add_argument("--quick", action="store_true", help="only pytest, memotest -jN")
    ap.add_argument(
        "--unconfigured",
        action="store_true",
        help="each run configures pytest itself (MEMOTEST_PYTEST_CONFIGURED=0), not forked "
        "from a configured worker (memotest's default, what is measured otherwise)",
    )
    args = ap.parse_args()
    EXTRA_ENV["MEMOTEST_PYTEST_CONFIGURED"] = "0" if args.unconfigured else "1"
    work = replay.WORK / "full-run"
    results = []
    todo: list[tuple[str, Path | None]] = [(name, None) for name in args.projects]
    if args.checkout:
        todo = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.checkout]
    for name, checkout in todo:
        before = os.getloadavg()[0]
        r = run(name, args.jobs, work, checkout, args.venv, args.quick)
        r["load"] = f"{before:.1f} to {os.getloadavg()[0]:.1f}"
        show(r)
        results.append(r)
    summary(results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
