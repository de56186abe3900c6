"""The make and BUILD rows of ``benchmarks/adapters.py`` (issue 28): what a replay costs.

On ``examples/clib`` (a small C library whose ``make test`` compiles and runs four test
programs; copied to a temporary folder):

* **line**: a replayed ``memotest-sh`` line (its stamp holds: ``docs/adapters/make.md``)
  against ``sh -c`` of the same line: the median wall time and the CPU time (user + system
  of the children) of N calls each. Goal: at most 30 ms more.
* **make test**: ``make test`` plainly, and with ``MEMOTEST_SH=1`` (``SHELL :=
  memotest-sh`` on the four test runs) once settled (run, replayed, aged past the racy
  window, replayed): medians of N. Goal: at most 1.2x plain make.
* **loader**: ``memotest build`` of the Makefile (``make:test``): the first build runs,
  the second should replay; then a failing edit of the library, its revert, and two
  builds: the second should replay.
* **BUILD**: a workspace of two ``py_test``s beside ``py_binary``, ``py_library``,
  ``filegroup``, ``genrule``, ``cc_library`` and an unknown macro: the tests build, the
  second build replays, and a new file at the workspace root should not re-run them.

Timing figures are noisy on a shared machine: the load average is printed with them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIB = REPO / "examples" / "clib"
BIN = Path(sys.executable).parent
AGE_S = 2.2  # past memotest's racy window (2 s): what was just written is stamped


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _timed(argv: list[str], cwd: Path, env: dict[str, str], n: int) -> tuple[float, float]:
    """Median wall time and mean CPU time (children's user + system), in ms, of n calls."""
    walls = []
    t0 = os.times()
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
    t1 = os.times()
    cpu = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    return statistics.median(walls) * 1e3, cpu / n * 1e3


def _interleaved(
    cases: list[tuple[list[str], dict[str, str]]], cwd: Path, n: int
) -> list[tuple[float, float]]:
    """:func:`_timed` of each case, one call of each in turn, n rounds: a load that drifts
    (a shared machine) weighs on every case alike."""
    walls: list[list[float]] = [[] for _ in cases]
    cpus = [0.0 for _ in cases]
    for _ in range(n):
        for i, (argv, env) in enumerate(cases):
            wall, cpu = _timed(argv, cwd, env, 1)
            walls[i].append(wall)
            cpus[i] += cpu
    return [(statistics.median(w), c / n) for w, c in zip(walls, cpus, strict=True)]


def _statuses(cwd: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    report = cwd.parent / f"{cwd.name}-report.json"  # outside: the project's folder is listed
    subprocess.run(
        [sys.executable, "-m", "memotest", "build", "--json-report", str(report), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        return {}
    return {t["name"]: t["status"] for t in data["targets"]}


def line_row(work: Path, n: int) -> dict:
    root = work / "line"
    root.mkdir()
    env = _env()
    line = ["memotest-sh", "--target=t", "-c", "echo hi"]  # as make runs it, env and all
    for _ in range(2):  # recorded, then replayed by the full check (which stamps it)
        subprocess.run(line, cwd=root, env=env, capture_output=True)
    time.sleep(AGE_S)
    subprocess.run(line, cwd=root, env=env, capture_output=True)
    memo, plain, floor = _interleaved(
        [(line, env), (["sh", "-c", "echo hi"], env), ([sys.executable, "-c", "pass"], env)],
        root,
        n,
    )  # the last: the interpreter's start
    stamped = any((root / ".memotest" / "make-stamps").glob("*.stamp"))
    return {
        "row": "memotest-sh line",
        "memotest_sh_ms": memo,
        "sh_ms": plain,
        "python_start_ms": floor,
        "more_ms": memo[0] - plain[0],
        "more_cpu_ms": memo[1] - plain[1],
        "stamped": stamped,
        "goal": memo[0] - plain[0] <= 30.0,
    }


def make_test_row(work: Path, n: int) -> dict:
    root = work / "clib-sh"
    shutil.copytree(CLIB, root, ignore=shutil.ignore_patterns(".memotest", "build"))
    env, memo_env = _env(), _env(MEMOTEST_SH="1")
    subprocess.run(["make", "test"], cwd=root, env=env, capture_output=True)
    for i in range(3):
        if i == 2:
            time.sleep(AGE_S)
        subprocess.run(["make", "test"], cwd=root, env=memo_env, capture_output=True)
    plain, memo = _interleaved([(["make", "test"], env), (["make", "test"], memo_env)], root, n)
    return {
        "row": "make test",
        "plain_ms": plain,
        "memotest_sh_ms": memo,
        "ratio": memo[0] / plain[0] if plain[0] else None,
        "goal": bool(plain[0]) and memo[0] / plain[0] <= 1.2,
    }


def _why(root: Path, env: dict[str, str]) -> str:
    """What ``memotest explain`` says of ``make:test`` now (its first line)."""
    proc = subprocess.run(
        [sys.executable, "-m", "memotest", "explain", "make:test"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0] if lines else ""


def loader_row(work: Path) -> dict:
    root = work / "clib-loader"
    shutil.copytree(CLIB, root, ignore=shutil.ignore_patterns(".memotest", "build"))
    env = _env()
    builds = [_statuses(root, env)]
    why = [_why(root, env)]
    builds += [_statuses(root, env), _statuses(root, env)]
    lib = root / "src" / "vec.c"
    good = lib.read_text()
    lib.write_text(good.replace("s += v->items[i];", "s -= v->items[i];"))
    failed = _statuses(root, env)
    lib.write_text(good)
    reverted = [_statuses(root, env)]
    why.append(_why(root, env))
    reverted += [_statuses(root, env), _statuses(root, env)]
    return {
        "row": "make loader",
        "builds": builds,
        "failing_edit": failed,
        "after_revert": reverted,
        "why_the_second_runs": why,
        "goal": all(s == "cached" for s in builds[1].values())
        and all(s == "cached" for s in reverted[1].values()),
    }


BUILD_FILE = """
load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")
py_binary(name = "app", srcs = ["app.py"], main = select({"//c": "app.py"}))
py_library(name = "lib", srcs = ["lib.py"])
filegroup(name = "data", srcs = ["data.txt"])
genrule(name = "gen", srcs = ["data.txt"], outs = ["gen.txt"], cmd = "cp $< $@")
cc_library(name = "clib", srcs = ["c.c"])
company_macro(name = "weird", anything = some_variable)
py_test(name = "lib_test", srcs = ["lib_test.py"], deps = [":lib"], data = [":data"])
py_test(name = "more_test", srcs = ["more_test.py"], deps = [":lib"])
"""


def build_row(work: Path) -> dict:
    root = work / "workspace"
    root.mkdir()
    files = {
        "MODULE.bazel": "",
        "BUILD.bazel": BUILD_FILE,
        "lib.py": "def double(x):\n    return 2 * x\n",
        "data.txt": "data\n",
        "lib_test.py": "import lib\nassert lib.double(2) == 4\nopen('data.txt').read()\n",
        "more_test.py": "import lib\nassert lib.double(3) == 6\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    env = _env()
    builds = [_statuses(root, env), _statuses(root, env)]
    (root / "NOTES.md").write_text("a new file at the workspace root\n")
    after_new_file = _statuses(root, env)
    return {
        "row": "BUILD",
        "builds": builds,
        "after_new_root_file": after_new_file,
        "goal": set(builds[0].values()) == {"passed"}
        and set(builds[1].values()) == {"cached"}
        and set(after_new_file.values()) == {"cached"},
    }


def run_all(n: int = 10) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="memotest-make-rows-") as tmp:
        work = Path(tmp)
        rows = [line_row(work, n), make_test_row(work, n), loader_row(work), build_row(work)]
    load = os.getloadavg()
    for row in rows:
        row["load"] = load
    return rows


def print_rows(rows: list[dict]) -> None:
    for r in rows:
        ok = "ok" if r["goal"] else "GOAL NOT MET"
        if r["row"] == "memotest-sh line":
            print(
                f"{r['row']}: replayed {r['memotest_sh_ms'][0]:.1f} ms (cpu "
                f"{r['memotest_sh_ms'][1]:.1f}), sh -c {r['sh_ms'][0]:.1f} ms (cpu "
                f"{r['sh_ms'][1]:.1f}): {r['more_ms']:+.1f} ms, goal <= 30 ms: {ok} "
                f"(python -c pass: {r['python_start_ms'][0]:.1f} ms, cpu "
                f"{r['python_start_ms'][1]:.1f})"
            )
        elif r["row"] == "make test":
            print(
                f"{r['row']}: plain {r['plain_ms'][0]:.0f} ms (cpu {r['plain_ms'][1]:.0f}), "
                f"memotest-sh replayed {r['memotest_sh_ms'][0]:.0f} ms (cpu "
                f"{r['memotest_sh_ms'][1]:.0f}): {r['ratio']:.2f}x, goal <= 1.2x: {ok}"
            )
        elif r["row"] == "make loader":
            print(
                f"{r['row']}: builds {r['builds']}; failing edit {r['failing_edit']}; "
                f"after its revert {r['after_revert']}: {ok}"
            )
            for why in r.get("why_the_second_runs", []):
                print(f"  before the second build: {why}")
        else:
            print(
                f"{r['row']}: builds {r['builds']}; after a new root file "
                f"{r['after_new_root_file']}: {ok}"
            )
    print("(load average " + " ".join(f"{x:.2f}" for x in rows[0]["load"]) + ")")


if __name__ == "__main__":
    found = run_all(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    print_rows(found)
    sys.exit(0 if all(r["goal"] for r in found) else 1)
