"""Commit-by-commit replay: memotest against one-process pytest and pytest-testmon over a
project's git history (issue 26).

``benchmarks/replay.py`` lays successive PyPI releases into working folders: on structlog
every release changes package code that every test imports, so every release re-runs every
target, and its figures measure a full run each time. What a memoizing test executor is for
is a developer's or CI's loop, commit by commit: this replays that.

For a project (its git mirror: ``replay_git_history.py``), the last N first-parent commits
of its default branch, oldest first. Each tool has its own working folder ("lane"), a real
clone of the mirror (``git clone --shared --no-checkout``) under
``$TMPDIR/memotest-bench-git/PROJECT/`` (``MEMOTEST_BENCH_WORK`` to choose another), and
at each commit every lane runs ``git checkout -q COMMIT`` (the files the commit leaves alone
keep their modification times; ``.git`` is there, as in real life), then, in this order:

* **pytest**: ``python -m pytest -q -p no:cacheprovider --continue-on-collection-errors
  TESTS``, one process: the baseline of every ratio;
* **memotest -j1** and **memotest -j2**: ``memotest build -jN --pytest TESTS``, each lane
  carrying its own store from commit to commit;
* **pytest-testmon**: ``python -m pytest --testmon ... TESTS``, its ``.testmondata``
  carried over likewise.

Measured per commit: each lane's wall time and CPU time (user + system of its process tree,
``RUSAGE_CHILDREN`` deltas: wall times are noisy on a shared machine), the files the commit
changed, the targets memotest ran and replayed (and memotest's reason for each re-run), the
tests testmon ran, ``os.getloadavg()``. And the **outcome agreement**, file by file and
test by test: the failing files and tests of the pytest session and of each memotest lane
are compared; every file where they differ is run alone (``python -m pytest FILE``, the
way memotest runs it) and a test that fails alone but not under memotest is a
**disagreement** (a false skip: printed file by file), a test that fails in the session
but passes alone an order difference across files.

The package is imported from the lane (``PYTHONPATH=<lane>/<import root>``, as replay.py
does), never installed. structlog and attrs take their version from installed metadata
(hatch-vcs, ``importlib.metadata``): the run writes what ``pip install -e .`` at the first
commit would leave, a ``.dist-info`` whose version is hatch-vcs's for that commit (from
``git describe --tags --long``: ``26.1.0-51-g...`` -> ``26.1.1.dev51``), outside the lanes
(``PROJECT/meta``, on ``PYTHONPATH`` too), and keeps it for the whole history: a developer
does not reinstall at every commit. The venv is replay.py's (``.bench/venv-PROJECT``:
memotest editable from this repository, pytest, testmon and the test requirements).

Run::

    python benchmarks/replay_git.py --projects structlog --commits 20
    python benchmarks/replay_git.py --quick          # 3 commits of structlog (smoke run)
    python benchmarks/replay_git.py --print          # its summaries recomputed, printed

Writes ``benchmarks/results/replay-git.json`` (a project run replaces that project's entry
and keeps the others; ``--quick``: ``replay-git-quick.json``), each lane's output in
``.bench/logs/<results file stem>/PROJECT/NN-COMMIT/``. Exit status 0 when there is no
disagreement, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay
import replay_git_history as history
import replay_git_report as report
import replay_tests

WORK = Path(
    os.environ.get("MEMOTEST_BENCH_WORK") or Path(tempfile.gettempdir()) / "memotest-bench-git"
)
LOGS = replay.BENCH / "logs" / "replay-git"
LANES = ("pytest", "j1", "j2", "testmon")
BUILDS = ("j1", "j2")
log = replay.log


def environment(project: replay.Project, lane: Path, venv: Path, meta: Path) -> dict[str, str]:
    env = replay.environment(dataclasses.replace(project, metadata=False), lane, venv)
    env["PYTHONPATH"] += os.pathsep + str(meta)
    # git's own variables would point the lane's git (pytest-benchmark's, a test's) elsewhere
    return {k: v for k, v in env.items() if not k.startswith("GIT_")}


def alone(py: str, lane: Path, rel: str, env: dict, logs: Path) -> dict:
    """One test file in its own pytest process, as memotest runs it: its exit status and
    its tests' outcomes (JUnit XML)."""
    junit = lane.parent / "junit-alone.xml"
    junit.unlink(missing_ok=True)
    cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", rel]
    _, proc = replay.timed(cmd, lane, env)
    (logs / ("alone-" + rel.replace("/", "_") + ".txt")).write_text(proc.stdout + proc.stderr)
    return {"exit": proc.returncode, "tests": replay_tests.outcomes(junit)}


class AloneRuns:
    """``alone`` of each file once per commit (both memotest lanes may ask)."""

    def __init__(self, py: str, lane: Path, env: dict, logs: Path) -> None:
        self.py, self.lane, self.env, self.logs = py, lane, env, logs
        self.cache: dict[str, dict] = {}

    def __call__(self, rel: str) -> dict:
        if rel not in self.cache:
            self.cache[rel] = alone(self.py, self.lane, rel, self.env, self.logs)
        return self.cache[rel]


def agreement(
    session: dict, build: dict, per_test: dict[str, dict], lane: Path, run_alone
) -> dict[str, list]:
    """The memotest lane ``build`` against the pytest session, file by file and test by
    test. Where they differ, the file alone (``run_alone(rel)``) decides: a test failing
    alone that memotest did not fail is a disagreement."""
    session_tests, build_tests = set(session["failing_tests"]), set(replay_tests.failing(per_test))
    files = set(session["failed"]) ^ set(build["failed"])
    files |= {history.test_file_of(t.split("::", 1)[0], lane) for t in session_tests ^ build_tests}
    out: dict[str, list] = {"disagreements": [], "extra_failures": [], "order": []}
    for rel in sorted(files):
        ref = run_alone(rel)
        failed_alone = ref["exit"] not in (0, 5)  # 5: no tests collected
        target = build.get("targets", {}).get(rel, {})
        status = target.get("status", "not a target")
        if failed_alone and rel not in build["failed"]:
            reason = target.get("reason")
            out["disagreements"].append({"file": rel, "memotest": status, "reason": reason})
        elif rel in build["failed"] and not failed_alone:
            out["extra_failures"].append({"file": rel, "memotest": status})
        if failed_alone != (rel in session["failed"]):
            out["order"].append(
                {"file": rel, "alone_exit": ref["exit"], "session_failed": rel in session["failed"]}
            )
        fails_alone = set(replay_tests.failing(ref["tests"]))
        for test in sorted(fails_alone - build_tests):
            got = per_test.get(test)
            how = "missing" if got is None else ("replayed " if got["cached"] else "ran ")
            how += got["outcome"] if got else ""
            out["disagreements"].append({"file": rel, "test": test, "memotest": how})
        for test in sorted((build_tests - fails_alone) & set(ref["tests"])):
            out["extra_failures"].append({"file": rel, "test": test})
    return out


def replay_history(project: replay.Project, mirror: Path, n: int) -> dict:
    commits = history.commits(mirror, n)
    log(f"== {project.name}: {len(commits)} commits of {mirror}, {commits[0].short}..")
    started, load_start = time.time(), os.getloadavg()
    venv = replay.venv(project)
    py = str(venv / "bin" / "python")
    work = WORK / project.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    lanes = {k: work / k for k in LANES}
    for lane in lanes.values():
        history.clone(mirror, lane)
    described = history.git(
        "--git-dir", str(mirror), "describe", "--tags", "--long", commits[0].sha
    )
    version = history.dev_version(described)
    dist = project.name.replace("-", "_").replace(".", "_").lower()
    pyproject = history.git("--git-dir", str(mirror), "show", f"{commits[0].sha}:pyproject.toml")
    meta = history.installed_metadata(work / "meta", dist, version, pyproject)
    log(f"  installed metadata: {dist} {version} (git describe {described.strip()}), kept")
    envs = {k: environment(project, lane, venv, meta) for k, lane in lanes.items()}
    revs: list[dict] = []
    previous: str | None = None
    for i, commit in enumerate(commits):
        change = history.diff(mirror, previous, commit.sha)
        previous = commit.sha
        for lane in lanes.values():
            history.checkout(lane, commit.sha)
        logs = LOGS / project.name / f"{i:02d}-{commit.short}"
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir(parents=True)
        rev: dict = {
            "commit": commit.sha,
            "subject": commit.subject,
            "index": i,
            "diff": change,
            "files_changed": sum(len(v) for v in change.values()),
            "load_before": os.getloadavg(),
        }
        # Why each stored -j1/-j2 target will re-run: the categories of its changed inputs
        rev["causes"] = {
            k: replay.attribute(py, lanes[k], change, envs[k], project) for k in BUILDS
        }
        rev["pytest"] = replay.pytest_lane(
            py, lanes["pytest"], project.tests, envs["pytest"], logs, 0
        )
        rev["pytest"]["cpu"] = round(replay.last_cpu, 3)
        per_test = {}
        for k in BUILDS:
            rev[k], per_test[k] = replay.memotest_build(
                venv, lanes[k], project.tests, k, envs[k], logs
            )
            rev[k]["cpu"] = round(replay.last_cpu, 3)
        rev["testmon"] = replay.testmon(py, lanes["testmon"], project.tests, envs["testmon"], logs)
        rev["testmon"]["cpu"] = round(replay.last_cpu, 3)
        rev["loadavg"] = os.getloadavg()
        run_alone = AloneRuns(py, lanes["pytest"], envs["pytest"], logs)
        rev["agreement"] = {
            k: agreement(rev["pytest"], rev[k], per_test[k], lanes["pytest"], run_alone)
            for k in BUILDS
        }
        rev["alone_runs"] = {rel: r["exit"] for rel, r in run_alone.cache.items()}
        log(report.commit_line(rev))
        for k in BUILDS:
            for d in rev["agreement"][k]["disagreements"]:
                log(f"  DISAGREEMENT -{k}: {json.dumps(d)}")
        revs.append(rev)
    return {
        "mirror": str(mirror),
        "tests": project.tests,
        "import_root": project.import_root,
        "metadata_version": version,
        "git_describe": described.strip(),
        "requirements": [project.pytest, *replay.COMMON_REQUIREMENTS, *project.requirements],
        "freeze": replay.freeze(venv),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "duration": round(time.time() - started, 1),
        "loadavg": {"start": load_start, "end": os.getloadavg()},
        "revisions": revs,
        "summary": report.summarize(revs, project),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--projects",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"among {', '.join(history.REPOSITORIES)} (default: structlog attrs)",
    )
    ap.add_argument("--commits", type=int, default=None, help="the last N commits (default 20)")
    ap.add_argument("--mirror", type=Path, default=None, help="the git mirror (one project)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 commits of structlog")
    ap.add_argument("--out", type=Path, default=None, help="the JSON results file")
    ap.add_argument(
        "--print",
        action="store_true",
        help="run nothing: recompute the summaries of the results file, rewrite it, print it",
    )
    args = ap.parse_args()
    names = [n for arg in args.projects or [] for n in arg.split(",") if n]
    names = names or (["structlog"] if args.quick else ["structlog", "attrs"])
    unknown = [n for n in names if n not in history.REPOSITORIES or n not in replay.PROJECTS]
    if unknown:
        ap.error(
            f"unknown project(s) {', '.join(unknown)}; known: {', '.join(history.REPOSITORIES)}"
        )
    if args.mirror and len(names) != 1:
        ap.error("--mirror takes one project")
    out = args.out or replay.RESULTS / (
        "replay-git-quick.json" if args.quick else "replay-git.json"
    )
    if args.print:
        if not out.exists():
            ap.error(f"{out}: no results file")
        results = json.loads(out.read_text())
        for name, p in results["projects"].items():
            p["summary"] = report.summarize(p["revisions"], replay.PROJECTS[name])
        out.write_text(json.dumps(results, indent=1) + "\n")
        report.print_tables(results)
        return 1 if report.any_disagreement(results) else 0
    n = args.commits or (3 if args.quick else 20)
    results: dict = json.loads(out.read_text()) if out.exists() else {"projects": {}}
    results.setdefault("runs", []).append(
        {
            "command": " ".join(["python", "benchmarks/replay_git.py", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": {
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
            },
        }
    )
    replay.BENCH.mkdir(exist_ok=True)
    global LOGS
    LOGS = replay.BENCH / "logs" / out.stem
    for name in names:
        mirror = args.mirror or history.mirror_of(name)
        if not (mirror / "HEAD").exists():
            sys.exit(
                f"{name}: no git mirror at {mirror} (fetch github:{history.REPOSITORIES[name]})"
            )
        results["projects"][name] = replay_history(replay.PROJECTS[name], mirror, n)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
    report.print_tables({"projects": {k: results["projects"][k] for k in names}})
    log(f"\nwrote {out.relative_to(replay.REPO) if out.is_relative_to(replay.REPO) else out}")
    return 1 if report.any_disagreement(results) else 0


if __name__ == "__main__":
    sys.exit(main())
