"""The make adapter: ``memotest-sh`` as make's SHELL, and the Makefile loader.

Real GNU make, real memotest-sh processes. A recipe proves whether it ran by appending to
a counter file outside the project (writes are not inputs, so this does not change what
is recorded).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, memotest
from memotest_make.shell import (
    is_marked,
    line_env,
    normalize_makeflags,
    override_names,
    parse_args,
)

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is needed")

BIN = Path(sys.executable).parent
PY = sys.executable

COUNT = """
import sys
with open(sys.argv[1], "a") as f:
    f.write(sys.argv[2] + "\\n")
print(sys.argv[2], "read", open(sys.argv[3]).read().strip() if len(sys.argv) > 3 else "")
sys.exit(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
"""

SLEEP = """
import sys, time
with open(sys.argv[1], "a") as f:
    f.write(f"{sys.argv[2]} start {time.time()}\\n")
time.sleep(1)
with open(sys.argv[1], "a") as f:
    f.write(f"{sys.argv[2]} end {time.time()}\\n")
print(sys.argv[2], "slept")
"""


def make_env(**extra: str) -> dict[str, str]:
    """This environment with memotest-sh on PATH and nothing of a calling make."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MEMOTEST_TARGETS")
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def make(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=root,
        env=make_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def runs(counter: Path, name: str) -> int:
    if not counter.exists():
        return 0
    return counter.read_text().split().count(name)


@pytest.fixture
def proj(tmp_path):
    """A project with marked targets ``test`` and ``bad`` and an unmarked ``other``."""
    counter = tmp_path / "counter"
    root = tmp_path / "proj"
    write(
        root,
        {
            "count.py": COUNT,
            "input.txt": "one",
            "Makefile": f"""
                MEMOTEST_TARGETS = test bad
                SHELL := memotest-sh
                .SHELLFLAGS = --target=$@ --memoize='$(MEMOTEST_TARGETS)' -c
                test:
                \t@{PY} count.py {counter} test input.txt
                bad:
                \t@{PY} count.py {counter} bad input.txt 3
                other:
                \t@{PY} count.py {counter} other
            """,
        },
    )
    return root, counter


def test_marked_recipe_runs_once_then_replays(proj):
    root, counter = proj
    first = make(root, "test")
    assert first.returncode == 0, first.stderr
    assert "test read one" in first.stdout
    second = make(root, "test")
    assert second.returncode == 0, second.stderr
    assert "test read one" in second.stdout  # the recorded log is shown
    assert "test: up to date, replayed" in second.stderr
    assert runs(counter, "test") == 1  # ... and the command did not run
    (root / "input.txt").write_text("two")
    third = make(root, "test")
    assert third.returncode == 0 and "test read two" in third.stdout
    assert "memotest failed" not in third.stderr  # a stale line is run and recorded
    assert runs(counter, "test") == 2
    fourth = make(root, "test")
    assert "test: up to date, replayed" in fourth.stderr, fourth.stderr
    assert runs(counter, "test") == 2


def test_failing_recipe_fails_make_every_time(proj):
    root, counter = proj
    for n in (1, 2):
        proc = make(root, "bad")
        assert proc.returncode == 2, proc.stdout  # make's status for a failed recipe
        assert "Error 3" in proc.stderr
        assert runs(counter, "bad") == n


def test_unmarked_target_runs_plainly(proj):
    root, counter = proj
    for n in (1, 2):
        proc = make(root, "other")
        assert proc.returncode == 0 and "other read" in proc.stdout
        assert "[memotest]" not in proc.stderr
        assert runs(counter, "other") == n
    assert not (root / ".memotest").exists()  # nothing was recorded


def test_marking_through_the_environment_and_every_target_by_default(tmp_path):
    counter = tmp_path / "counter"
    root = write(
        tmp_path / "p",
        {
            "count.py": COUNT,
            "Makefile": f"""
                SHELL := memotest-sh
                .SHELLFLAGS = --target=$@ -c
                a:
                \t@{PY} count.py {counter} a
                b:
                \t@{PY} count.py {counter} b
            """,
        },
    )
    for _ in range(2):
        assert make(root, "a", "b", MEMOTEST_TARGETS="a").returncode == 0
    assert (runs(counter, "a"), runs(counter, "b")) == (1, 2)
    for _ in range(2):  # MEMOTEST_TARGETS unset: every target is memoized
        assert make(root, "a", "b").returncode == 0
    assert (runs(counter, "a"), runs(counter, "b")) == (1, 3)


def intervals(log: Path, skip: int = 0) -> dict[str, list[float]]:
    """Start and end times of each recipe, from the log's lines after the first ``skip``."""
    spans: dict[str, list[float]] = {}
    if not log.exists():
        return spans
    for line in log.read_text().splitlines()[skip:]:
        name, _, t = line.split()
        spans.setdefault(name, []).append(float(t))
    return spans


def most_at_once(spans: dict[str, list[float]]) -> int:
    events = sorted((t, -1 if i else +1) for s in spans.values() for i, t in enumerate(s))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def lines(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_parallel_make_runs_marked_recipes_side_by_side(tmp_path):
    # The recipes log to a file outside the project. They all write it, so it is one of
    # their outputs: deleting it would (rightly) make them run again; it only grows here.
    log = tmp_path / "times"
    rules = "".join(f"{n}:\n\t@{PY} sleep.py {log} {n}\n" for n in "abcde")
    rules += f"warm:\n\t@{PY} -c pass\n"
    root = write(
        tmp_path / "p",
        {
            "sleep.py": SLEEP,
            "Makefile": "SHELL := memotest-sh\n.SHELLFLAGS = --target=$@ -c\n" + rules,
        },
    )
    assert make(root, "warm").returncode == 0  # the store exists, the disk cache is warm
    t0 = time.monotonic()
    proc = make(root, "-j2", "a", "b")
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert "a slept" in proc.stdout and "b slept" in proc.stdout
    print(f"two 1 s recipes at -j2: {elapsed:.2f}s")
    # The proof of parallelism is the overlap the recipes recorded themselves; the wall
    # time is printed for information only (a timed assertion flakes on a loaded machine).
    assert most_at_once(intervals(log)) == 2

    # Three fresh recipes at -j2: make's jobserver still allows only two at once.
    seen = lines(log)
    proc = make(root, "-j2", "c", "d", "e")
    assert proc.returncode == 0, proc.stderr
    spans = intervals(log, seen)
    assert sorted(spans) == ["c", "d", "e"]
    assert most_at_once(spans) == 2

    # -j1 and -j3 replay what -j2 recorded; a variable set on make's command line is a
    # real difference (make exports it to the recipe), so that one runs.
    seen = lines(log)
    proc = make(root, "a", "b")
    assert proc.returncode == 0 and "a slept" in proc.stdout
    proc = make(root, "-j3", "c", "d", "e")
    assert proc.returncode == 0 and proc.stderr.count("up to date, replayed") == 3
    assert lines(log) == seen
    proc = make(root, "a", "FLAVOUR=x")
    assert proc.returncode == 0
    assert list(intervals(log, seen)) == ["a"]


def test_oneshell_recipe_is_one_memoized_command(tmp_path):
    counter = tmp_path / "counter"
    root = write(
        tmp_path / "p",
        {
            "count.py": COUNT,
            "input.txt": "x",
            "Makefile": f"""
                .ONESHELL:
                SHELL := memotest-sh
                .SHELLFLAGS = --target=$@ -ec
                test:
                \t@msg=hello
                \t{PY} count.py {counter} test input.txt
                \techo "$$msg from one shell"
            """,
        },
    )
    for _ in range(2):
        proc = make(root, "test")
        assert proc.returncode == 0, proc.stderr
        assert "hello from one shell" in proc.stdout
    assert runs(counter, "test") == 1


def test_deleted_output_makes_the_recipe_run_again(tmp_path):
    counter = tmp_path / "counter"
    root = write(
        tmp_path / "p",
        {
            "count.py": COUNT,
            "Makefile": f"""
                SHELL := memotest-sh
                .SHELLFLAGS = --target=$@ -c
                out.txt:
                \t{PY} count.py {counter} gen > $@
                clean:
                \trm -f out.txt
            """,
        },
    )
    assert make(root, "out.txt").returncode == 0
    make(root, "clean")
    proc = make(root, "out.txt")
    assert proc.returncode == 0, proc.stderr
    assert (root / "out.txt").exists()
    assert runs(counter, "gen") == 2


def test_make_C_keeps_the_store_in_the_makefile_folder(proj):
    root, counter = proj
    for _ in range(2):
        assert make(root.parent, "-C", "proj", "test").returncode == 0
    assert runs(counter, "test") == 1
    assert (root / ".memotest").is_dir()
    assert not (root.parent / ".memotest").exists()


# -- the loader ------------------------------------------------------------------------------


def test_loader_runs_make_targets_and_caches(proj):
    root, counter = proj
    report = root.parent / "report.json"
    for expected in ("passed", "cached"):
        proc = memotest(
            "build",
            "-f",
            "Makefile",
            "--json-report",
            str(report),
            "test",
            cwd=root,
            env=make_env(),
        )
        assert proc.returncode == 0, proc.stderr.decode()
        data = json.loads(report.read_text())
        assert {t["name"]: t["status"] for t in data["targets"]} == {"make:test": expected}
    assert runs(counter, "test") == 1
    # A failing target fails the build; no names means MEMOTEST_TARGETS (test and bad).
    proc = memotest("build", cwd=root, env=make_env())
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert "make:test" in out and "make:bad" in out and "make:other" not in out


def test_loader_needs_follow_prerequisites(tmp_path):
    root = write(
        tmp_path,
        {"Makefile": "all: a\na: b\n\t@echo a\nb:\n\t@echo b\nclean:\n\t@echo clean\n"},
    )
    proc = memotest("build", "--from", "make", "-j", "2", cwd=root)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert out.index("make:b") < out.index("make:a") < out.index("make:all")
    assert "make:clean" not in out  # the default goal and what it needs, nothing else


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("a:\n\techo a\nthis is wrong\n", ":3:", "missing separator"),
        ("include nothere.mk\na:\n\techo a\n", ":1:", "nothere.mk"),
        ("a:\n\techo a\n$(error boom)\n", ":3:", "boom"),
    ],
)
def test_loader_reports_makefile_errors_with_file_and_line(tmp_path, text, where, message):
    (tmp_path / "Makefile").write_text(text)
    proc = memotest("build", "-f", "Makefile", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert f"{tmp_path / 'Makefile'}{where} make: " in err and message in err
    assert not (tmp_path / ".memotest").exists()


def test_loader_unreadable_makefile(tmp_path):
    proc = memotest("build", "-f", "Makefile", "--from", "make", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{tmp_path / 'Makefile'}: make: cannot read the Makefile" in proc.stderr.decode()


def test_example_project(tmp_path):
    root = tmp_path / "make"
    shutil.copytree(REPO / "examples" / "make", root, ignore=shutil.ignore_patterns(".memotest"))
    first = make(root, "-j2", "check", PYTHON=PY)
    assert first.returncode == 0, first.stderr
    second = make(root, "-j2", "check", PYTHON=PY)
    assert second.returncode == 0, second.stderr
    assert second.stderr.count("up to date, replayed") == 4  # 2 tests, 2 lint lines


# -- memotest-sh's pieces ----------------------------------------------------------------------


def test_shellflags_parsing():
    inv = parse_args(["--target=t", "--memoize=a b", "-o", "pipefail", "-c", "echo hi"])
    assert (inv.target, inv.memoize, inv.shell_flags, inv.recipe) == (
        "t",
        ["a", "b"],
        ["-o", "pipefail", "-c"],
        "echo hi",
    )
    # make expands $@ to nothing for $(shell ...): no target, the rest is the shell's.
    inv = parse_args(["--target", "-c", "date"])
    assert (inv.target, inv.shell_flags, inv.recipe) == (None, ["-c"], "date")
    assert is_marked("test-io", ["test-%"], {})
    assert not is_marked("clean", None, {"MEMOTEST_TARGETS": "test lint"})
    assert is_marked("clean", None, {})


def test_makeflags_key_ignores_parallelism_only():
    assert normalize_makeflags(" -j2 --jobserver-auth=3,4") == ""
    assert normalize_makeflags("") == ""
    assert normalize_makeflags("ks -j4 --jobserver-auth=3,4 -Oline") == "k"
    flags = " -j2 --jobserver-auth=3,4 -- CFLAGS=-O2 N\\ B=x"
    assert normalize_makeflags(flags) == "-- CFLAGS=-O2 N\\ B=x"
    assert override_names(" -- CFLAGS=-O2 X:=1") == ["CFLAGS", "X"]
    env = line_env({"MAKEFLAGS": "k -j2 -- CFLAGS=-O2", "CFLAGS": "-O2", "MAKELEVEL": "1"})
    assert env == {"MAKEFLAGS": "k -- CFLAGS=-O2", "CFLAGS": "-O2"}


def test_the_loaders_first_build_runs_each_recipe_once(tmp_path):
    """Four test targets writing into one folder, and ``test`` needing them: each recipe
    runs once in the first build (one make at a time: no hazard to re-run; ``test``'s make
    takes its prerequisites as done), and a build with nothing changed outside replays."""
    root = write(
        tmp_path / "proj",
        {
            "src/a.sh": "echo a ok",
            "src/b.sh": "echo b ok",
            "src/c.sh": "echo c ok",
            "src/d.sh": "echo d ok",
            "Makefile": """
                MEMOTEST_TARGETS = test
                .PHONY: test
                test: run-a run-b run-c run-d
                run-a run-b run-c run-d: run-%: src/%.sh
                \t@echo "$*" >> ../count-$*; mkdir -p ../out; sh src/$*.sh > ../out/$*
            """,
        },
    )
    first = memotest("build", "-j", "2", cwd=root)
    assert first.returncode == 0, first.stderr.decode()
    assert [runs(tmp_path / f"count-{t}", t) for t in "abcd"] == [1, 1, 1, 1]
    second = memotest("build", "-j", "2", cwd=root)
    assert second.returncode == 0, second.stderr.decode()
    assert [runs(tmp_path / f"count-{t}", t) for t in "abcd"] == [1, 1, 1, 1]
    (root / "src" / "b.sh").write_text("echo b changed")
    assert memotest("build", "-j", "2", cwd=root).returncode == 0
    assert [runs(tmp_path / f"count-{t}", t) for t in "abcd"] == [1, 2, 1, 1]


def test_a_target_that_sees_what_its_run_made_runs_again(tmp_path):
    """The attack on settling the loader in one build by taking what a run made as the
    state it started from (issue 28): a recipe that fails when its own output is there
    passed in the first build, and the second must run it, and fail, not replay a pass.
    make's own checks of a target file it then built are the same observation."""
    root = write(
        tmp_path / "proj",
        {
            "Makefile": """
                .PHONY: check
                check:
                \t@test ! -e made || { echo "made already"; exit 1; }
                \t@touch made
            """,
        },
    )
    report = tmp_path / "report.json"
    statuses = []
    for _ in range(2):
        memotest("build", "--json-report", str(report), "check", cwd=root, env=make_env())
        statuses.append({t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]})
    assert statuses == [{"make:check": "passed"}, {"make:check": "failed"}]


def _two_builds(tmp_path: Path, makefile: str) -> list[dict[str, str]]:
    root = write(tmp_path / "proj", {"Makefile": makefile})
    report = tmp_path / "report.json"
    statuses = []
    for _ in range(2):
        memotest("build", "--json-report", str(report), "check", cwd=root, env=make_env())
        statuses.append({t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]})
    return statuses


def test_a_wildcard_that_lists_what_the_run_made_runs_again(tmp_path):
    """The attack on waiving make's own listing of a folder that gained only what the run
    made (issue 28): make's ``$(wildcard)`` reads the folder through the same listing as
    its existence checks, and the next run expands to what this one made."""
    makefile = """
        FOUND := $(wildcard *.made)
        .PHONY: check
        check:
        \t@test -z "$(FOUND)" || { echo "make found $(FOUND)"; exit 1; }
        \t@touch x.made
    """
    assert _two_builds(tmp_path, makefile) == [{"make:check": "passed"}, {"make:check": "failed"}]


def test_a_target_file_the_run_made_skips_its_recipe_next_time(tmp_path):
    """The attack on waiving make's own check of a target file that the run then made
    (make's up-to-date logic, issue 28): next time make finds it up to date and skips its
    recipe, and what the recipe did besides (``flag``, made and removed within the run,
    so an output, not an input) is not done: plain make fails, and so must the build."""
    makefile = """
        .PHONY: check
        check: build/out
        \t@test -e flag || { echo "build/out's recipe did not run"; exit 1; }
        \t@rm flag
        build/%:
        \t@mkdir -p build; touch $@ flag
    """
    assert _two_builds(tmp_path, makefile) == [{"make:check": "passed"}, {"make:check": "failed"}]
