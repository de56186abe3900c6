"""tox and nox on real projects: does the second run replay, and what re-runs it.

Six projects from their PyPI sdists (which ship their tests and their tox or nox
configuration), each with one env or session that runs on the machine's Python 3.11:

* **click** (tox): ``[tool.tox]`` in ``pyproject.toml`` (tox 4's native TOML),
  ``runner = "uv-venv-lock-runner"`` from ``tox-uv`` with ``dependency_groups`` and the
  sdist's ``uv.lock``, and ``pytest --basetemp={env_tmp_dir}``: the configuration of the
  Pallets projects (flask, jinja, werkzeug, ... are alike). ~1,300 tests in a few seconds.
* **cachetools** (tox): a classic ``tox.ini`` with ``py.test --basetemp={envtmpdir}`` and
  ``pytest-cov`` (coverage inside the env's command), the plain virtualenv runner.
* **pyproject-api** (tox): ``tox.toml`` with ``requires = ["tox-uv"]``,
  ``dependency_groups``, ``package = "wheel"``, coverage with ``COVERAGE_FILE`` and
  ``COVERAGE_PROCESS_START`` and a JUnit XML report written to tox's ``work_dir`` (the
  tox-dev family: tox, virtualenv, filelock, platformdirs are alike). Its package env
  defaults to Python 3.15 and its 100% coverage floor and one test hold on 3.15 only: the
  benchmark sets the package env's Python (``-x``) and passes its default posargs without
  the floor and that test.
* **referencing** (nox): ``nox.options.default_venv_backend = "uv|virtualenv"`` (the uv
  backend here), sessions selected by a custom ``nox.options.sessions`` list with sessions
  not selected by default, and coverage inside the session (``nox -s tests-3.11 --
  coverage`` runs ``coverage run -m pytest`` then ``coverage report``).
* **jsonschema** (nox): the same noxfile family, a parametrized session
  (``tests-3.11(no-extras)``), a test runner that is not pytest (``virtue``, on
  ``unittest``) and a test-suite folder given by an environment variable.
* **nox** (nox): nox's own noxfile: ``uv|virtualenv``, non-default sessions
  (``minimums``, ``default=False``), and ``coverage erase`` / ``coverage run -m pytest
  --numprocesses=auto`` / ``coverage combine`` / ``coverage report`` in one session
  (``.coverage.*`` files made, read and rewritten: item 5 of issue 19). Its whole suite
  makes venvs and runs tox and nox, minutes here: three of its test files are given as
  the session's posargs.

jsonschema is also run through the nox loader (``jsonschema-build``: ``memotest build
--from nox``, the session as one target run with ``nox -R``).

For each project: the plain tool without memotest (``tox -e ENV --no-memotest``; for nox
the unmodified noxfile), once to make the env (cold) and once more (warm, the time to
compare with); then with memotest (tox: the plugin, active since memotest is installed in
tox's Python; nox: the helper, ``@memoized`` added under the session's decorator as
``docs/adapters/nox.md`` says) runs 1, 2 and 3; then after appending a comment to a source
module (must re-run, and say why), then after appending a line to a docs-only or changelog
file (must replay). After each memoized run ``memotest explain TARGET`` is asked whether
the next run would replay, and its first lines are kept: that is the reason shown when a
goal fails.

Goals, printed against: run 2 replays on every project, in under 5% of run 1's time (of
the commands' time, as tox reports ``cmd[...]``; nox reports no per-command time, so its
whole session time); no docs-only edit re-runs anything.

tox, tox-uv and nox run from their own venvs in ``.bench/`` (``venv-tox``, ``venv-nox``),
with memotest installed editable from this repository. Sources are extracted once into
``.bench/src``; each run starts from a fresh copy in ``$TMPDIR/memotest-adapters/``
(``MEMOTEST_BENCH_WORK`` to choose another; never inside this repository, whose own
``pyproject.toml`` pytest would otherwise find). Only PyPI and the machine's Pythons are
used (``UV_PYTHON_DOWNLOADS=never``).

Run::

    python benchmarks/adapters.py                     # the six projects
    python benchmarks/adapters.py --quick             # click and referencing
    python benchmarks/adapters.py --projects cachetools,nox

Writes ``benchmarks/results/adapters.json`` (``adapters-quick.json`` with ``--quick``).
Exit status 0 when every goal holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay
from replay import extracted, log, run

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / ".bench"
RESULTS = REPO / "benchmarks" / "results"
WORK = Path(
    os.environ.get("MEMOTEST_BENCH_WORK") or Path(tempfile.gettempdir()) / "memotest-adapters"
)
RUN_TIMEOUT = 1200
#: The host tools, each in its own venv with memotest (editable, from this repository).
HOSTS = {
    "tox": ("tox==4.67.15", "tox-uv", "uv"),
    "nox": ("nox==2026.10.20", "uv"),
}


@dataclass(frozen=True)
class Project:
    name: str  # the PyPI name
    version: str
    tool: str  # "tox", "nox" (the helper) or "nox-build" (the loader: memotest build)
    env: str  # the tox env or nox session run
    source: str  # a source module edited (must re-run)
    docs: str  # a docs-only or changelog file edited (must replay)
    why: str
    posargs: tuple[str, ...] = ()
    tool_args: tuple[str, ...] = ()  # more options for tox or nox
    function: str = "tests"  # nox: the session's function, decorated with @memoized


PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        Project(
            "click",
            "8.5.1",
            "tox",
            "py3.11",
            "src/click/core.py",
            "CHANGES.md",
            "[tool.tox] in pyproject.toml, tox-uv's uv-venv-lock-runner, dependency_groups, "
            "pytest --basetemp={env_tmp_dir}",
        ),
        Project(
            "cachetools",
            "8.0.2",
            "tox",
            "py311",
            "src/cachetools/__init__.py",
            "CHANGELOG.rst",
            "tox.ini, py.test --basetemp={envtmpdir}, pytest-cov in the command",
        ),
        Project(
            "pyproject-api",
            "1.12.1",
            "tox",
            "3.11",
            "src/pyproject_api/_frontend.py",
            "README.md",
            "tox.toml with tox-uv, dependency_groups, coverage and JUnit XML in work_dir",
            # The package env's default_base_python is 3.15, not on this machine.
            tool_args=("-x", "env_pkg_base.default_base_python=3.11"),
            # Its default posargs, with --cov-fail-under=0 (100% is reached on 3.15 only) and
            # with test_result_missing deselected (it expects 3.15's traceback format and
            # fails on 3.11 with or without memotest).
            posargs=(
                "--junitxml=.tox/junit.3.11.xml",
                "--cov=pyproject_api",
                "--cov-config=pyproject.toml",
                "--cov-report=term-missing:skip-covered",
                "--cov-fail-under=0",
                "--deselect=tests/test_frontend_setuptools.py::test_result_missing",
                "tests",
            ),
        ),
        Project(
            "referencing",
            "0.37.0",
            "nox",
            "tests-3.11",
            "referencing/_core.py",
            "CHANGELOG.rst",
            "uv backend, custom default session list, coverage run + report in the session",
            posargs=("coverage",),
        ),
        Project(
            "jsonschema",
            "4.26.0",
            "nox",
            "tests-3.11(no-extras)",
            "jsonschema/validators.py",
            "CHANGELOG.rst",
            "uv backend, parametrized session, virtue (unittest) runner, suite via env var",
        ),
        Project(
            "nox",
            "2026.10.20",
            "nox",
            "tests-3.11",
            "nox/sessions.py",
            "CHANGELOG.md",
            "uv backend, non-default sessions, coverage erase/run/combine/report, xdist",
            # Its whole suite takes minutes here (it makes venvs and runs tox and nox):
            # three of its test files, through the session's own commands.
            posargs=("tests/test_sessions.py", "tests/test_registry.py", "tests/test_manifest.py"),
        ),
    )
}
#: jsonschema again, through the nox loader (``memotest build --from nox``) instead of the
#: helper: the session as one target, run with ``nox -R`` (see docs/adapters/nox.md).
PROJECTS["jsonschema-build"] = Project(
    "jsonschema",
    "4.26.0",
    "nox-build",
    "tests-3.11(no-extras)",
    "jsonschema/validators.py",
    "CHANGELOG.rst",
    "the nox loader: the whole session one target, nox -R",
)
DEFAULT_PROJECTS = tuple(PROJECTS)
QUICK_PROJECTS = ("click", "referencing")
#: tox's summary line: "py3.11: OK (8.15=setup[7.13]+cmd[1.02] seconds)"
TOX_SUMMARY = re.compile(
    r"^\s*(\S+): (OK|FAIL[^(]*?)\s*\(([\d.]+)=setup\[([\d.]+)\]\+cmd\[([\d.]+)\]", re.M
)


def host(tool: str) -> Path:
    """.bench/venv-TOOL: the tool and memotest (editable); made once."""
    path = BENCH / f"venv-{tool}"
    reqs = list(HOSTS[tool])
    stamp = path / "bench-requirements.json"
    wanted = json.dumps({"python": sys.version, "requirements": reqs})
    if stamp.exists() and stamp.read_text() == wanted:
        return path
    log(f"  making {path.relative_to(REPO)}")
    shutil.rmtree(path, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(path)])
    run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(REPO), *reqs])
    stamp.write_text(wanted)
    return path


def environment(venv: Path) -> dict[str, str]:
    """The host venv first on PATH; no outer venv, memotest or uv setting leaks in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMOTEST", "VIRTUAL_ENV", "TOX", "NOX", "UV_", "PYTEST"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def checkout(project: Project, lane: str) -> Path:
    """A fresh copy of the release's files in the work folder."""
    src = extracted(project.name, project.version)
    dest = WORK / f"{project.name}-{project.tool}" / lane
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".complete"))
    return dest


def memoize_noxfile(path: Path, function: str) -> None:
    """Adds the helper as a user would: the import, and ``@memoized`` right above
    ``def FUNCTION(`` (so under the session's decorators)."""
    text = path.read_text()
    text = re.sub(
        r"^import nox$", "import nox\nfrom memotest_nox import memoized", text, count=1, flags=re.M
    )
    text, n = re.subn(
        rf"^def {function}\(", f"@memoized\ndef {function}(", text, count=1, flags=re.M
    )
    if n != 1:
        sys.exit(f"{path}: no `def {function}(` to decorate")
    path.write_text(text)


def command(project: Project, memoized: bool) -> list[str]:
    if project.tool == "tox":
        cmd = ["tox", "-e", project.env]
        if not memoized:
            cmd.append("--no-memotest")
    elif project.tool == "nox-build" and memoized:
        return ["memotest", "build", "-v", "--from", "nox", f"nox:{project.env}"]
    else:
        cmd = ["nox", "-s", project.env]
    cmd += project.tool_args
    if project.posargs:
        cmd += ["--", *project.posargs]
    return cmd


#: The loader's status line of a replayed target (``[1/1] (cached) PASSED NAME``).
CACHED_LINE = re.compile(r"^(\[\d+/\d+\] )?\(cached\) PASSED ")


def timed(cmd: list[str], cwd: Path, env: dict, logfile: Path) -> dict:
    wall, proc = replay.timed(cmd, cwd, env, timeout=RUN_TIMEOUT)
    out = proc.stdout + proc.stderr
    logfile.parent.mkdir(parents=True, exist_ok=True)
    logfile.write_text(f"$ {' '.join(cmd)}\n{out}\nexit {proc.returncode}\n")
    result: dict = {"wall": round(wall, 2), "exit": proc.returncode}
    for m in TOX_SUMMARY.finditer(out.replace("\r", "")):
        result["cmd"] = float(m.group(5))
        result["setup"] = float(m.group(4))
    notes = [ln.strip() for ln in out.splitlines() if "memotest" in ln and "-m memotest_" not in ln]
    result["notes"] = notes[-6:]
    result["replays"] = sum(
        "cached, replayed" in n or "replaying its output" in n for n in notes
    ) + sum(bool(CACHED_LINE.match(ln)) for ln in out.splitlines())
    return result


def explain(venv: Path, cwd: Path, env: dict, target: str) -> list[str] | None:
    """``memotest explain TARGET``'s first lines (would the next run replay, and why not);
    None when the store has no such record."""
    proc = subprocess.run(
        [str(venv / "bin" / "memotest"), "explain", target],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    if proc.returncode == 2 and "unknown target" in out:
        return None
    return [ln for ln in out.strip().splitlines() if not ln.startswith("(a record in")][:6]


def records(project: Project, venv: Path, cwd: Path, env: dict) -> dict[str, list[str]]:
    """The memoized records of the env or session, each with ``memotest explain``'s
    answer: tox's one record ``tox:ENV``; the nox helper's ``nox:SESSION:N``, one per
    memoized ``session.run`` call, probed from 1 until the store has no such record."""
    if project.tool in ("tox", "nox-build"):
        name = f"{project.tool[:3]}:{project.env}"
        found = explain(venv, cwd, env, name)
        return {name: found} if found is not None else {}
    out: dict[str, list[str]] = {}
    for n in range(1, 20):
        found = explain(venv, cwd, env, f"nox:{project.env}:{n}")
        if found is None:
            break
        out[f"nox:{project.env}:{n}"] = found
    return out


def append(path: Path, line: str) -> None:
    # An edit, never a new file (a new entry at the rootdir re-runs, rightly).
    if not path.is_file():
        sys.exit(f"the file to edit does not exist: {path}")
    with path.open("a") as f:
        f.write(line)


def bench(key: str, project: Project, logs: Path) -> dict:
    venv = host(project.tool[:3])
    env = environment(venv)
    log(f"{project.name} ({project.tool} {project.env})")
    res: dict = {"project": key, "version": project.version, "tool": project.tool}
    res |= {"env": project.env, "why": project.why}

    plain = checkout(project, "plain")
    res["plain_cold"] = timed(command(project, False), plain, env, logs / "plain-cold.log")
    res["plain"] = timed(command(project, False), plain, env, logs / "plain-warm.log")
    log(f"  plain: cold {res['plain_cold']['wall']} s, warm {res['plain']['wall']} s")

    lane = checkout(project, "memotest")
    if project.tool == "nox":
        memoize_noxfile(lane / "noxfile.py", project.function)
    cmd = command(project, True)
    steps = [("run1", None), ("run2", None), ("run3", None)]
    steps += [("source edit", project.source), ("docs edit", project.docs)]
    for name, edit in steps:
        slug = name.replace(" ", "-")
        if edit:
            append(lane / edit, "\n# memotest benchmark edit\n" if edit.endswith(".py") else "\n")
        if project.tool == "nox" and name != "run1":  # the helper
            # nox remakes the venv at the start of the session, and what the new venv
            # holds decides the replay; the helper does not say why a call runs, so the
            # venv is remade first (--install-only) and explain asked then.
            install = [*cmd[:3], "--install-only", *cmd[3:]]
            timed(install, lane, env, logs / f"{slug}-install.log")
        before = records(project, venv, lane, env)
        r = timed(cmd, lane, env, logs / f"{slug}.log")
        # Replayed: the run said so for each of its records (tox: "cached, replayed";
        # the nox helper: "... is up to date", one per memoized call; the loader:
        # "(cached) PASSED").
        r["explain_before"] = before
        r["explain_after"] = records(project, venv, lane, env)
        r["replayed"] = r["replays"] >= max(1, len(r["explain_after"]))
        res[name] = r
        log(f"  {name}: {r['wall']} s exit {r['exit']} replayed={r['replayed']}")
        for lines in (before if not r["replayed"] else {}).values():
            log(f"      before: {(lines or ['?'])[0][:200]}")
        for n in r["notes"][-3:]:
            log(f"      {n[:200]}")
    res["goals"] = goals(res)
    return res


def elapsed(r: dict) -> float:
    """The commands' time when tox reports it, else the whole run's."""
    return r.get("cmd", r["wall"])


def goals(res: dict) -> dict:
    r1, r2 = res["run1"], res["run2"]
    return {
        "run2_replays": r2["replayed"],
        "run2_under_5pct": r2["replayed"] and elapsed(r2) < 0.05 * elapsed(r1),
        "source_edit_reruns": not res["source edit"]["replayed"],
        "docs_edit_replays": res["docs edit"]["replayed"],
    }


def print_table(results: list[dict]) -> None:
    head = (
        f"{'project':16} {'tool':9} {'plain':>7} {'run1':>7} {'run2':>7} {'run3':>7} "
        f"{'src edit':>9} {'docs edit':>9}  goals"
    )
    print("\n" + head + "\n" + "-" * len(head))

    def cell(r: dict) -> str:
        mark = "R" if r["replayed"] else ("F" if r["exit"] else "r")
        return f"{elapsed(r):6.1f}{mark}"

    for res in results:
        g = res["goals"]
        failed = [k for k, v in g.items() if not v]
        print(
            f"{res['project']:16} {res['tool']:9} {elapsed(res['plain']):6.1f}s "
            f"{cell(res['run1'])} {cell(res['run2'])} {cell(res['run3'])} "
            f"{cell(res['source edit']):>9} {cell(res['docs edit']):>9}  "
            + ("ok" if not failed else "FAIL: " + ", ".join(failed))
        )
    print(
        "\nseconds (tox: the commands' time, cmd[...]; nox: the whole session); "
        "R replayed, r ran, F ran and failed"
    )
    print(
        "goals: run 2 replays, in < 5% of run 1's time; a source edit re-runs; "
        "a docs-only edit replays"
    )


def save(out: Path, results: list[dict], keep_others: bool) -> None:
    """Writes the results so far (after each project: a long run stopped midway keeps
    what it measured); with ``--projects``, the other projects of an earlier run stay."""
    meta = {"python": platform.python_version(), "machine": platform.machine()}
    for tool in sorted({r["tool"][:3] for r in results}):
        meta[tool] = run([str(host(tool) / "bin" / "python"), "-m", "pip", "freeze"]).stdout
    done = {r["project"] for r in results}
    if keep_others and out.exists():
        old = json.loads(out.read_text())["projects"]
        results = [r for r in old if r["project"] not in done] + results
    out.write_text(json.dumps({"meta": meta, "projects": results}, indent=2) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only " + ", ".join(QUICK_PROJECTS))
    ap.add_argument("--projects", help="comma-separated, from: " + ", ".join(PROJECTS))
    ap.add_argument(
        "--stem", help="the results file's name (benchmarks/results/STEM.json) and logs' folder"
    )
    ap.add_argument(
        "--make", action="store_true", help="only the make and BUILD rows (benchmarks/make_rows.py)"
    )
    ap.add_argument(
        "--git",
        action="store_true",
        help="only the tox and nox rows of a git project using pytest-benchmark (git_rows.py)",
    )
    args = ap.parse_args()
    if args.make:
        return make_rows_main()
    if args.git:
        return git_rows_main()
    names = (
        args.projects.split(",")
        if args.projects
        else QUICK_PROJECTS
        if args.quick
        else DEFAULT_PROJECTS
    )
    stem = args.stem or ("adapters-quick" if args.quick else "adapters")
    out = RESULTS / f"{stem}.json"
    results: list[dict] = []
    for name in names:
        results.append(bench(name, PROJECTS[name], BENCH / "logs" / stem / name))
        save(out, results, keep_others=bool(args.projects))
    print_table(results)
    print(f"\nwrote {out.relative_to(REPO)}")
    return 0 if all(all(r["goals"].values()) for r in results) else 1


def make_rows_main() -> int:
    """The make and BUILD rows (issue 28): ``benchmarks/make_rows.py``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_rows

    rows = make_rows.run_all()
    make_rows.print_rows(rows)
    (RESULTS / "adapters-make.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["goal"] for r in rows) else 1


def git_rows_main() -> int:
    """The tox and nox rows of issue 25 (``benchmarks/git_rows.py``)."""
    import git_rows

    rows = git_rows.run_all()
    git_rows.print_rows(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "adapters-git.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["goal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
