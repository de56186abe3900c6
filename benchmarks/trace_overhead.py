"""Tracer overhead: wall time of commands bare, under memotest's tracer, and under strace.

Three workloads, set up in a temporary folder:

a. a real Python test suite: the sdist of ``more-itertools`` (pinned), downloaded from PyPI
   with ``pip download``, unpacked, its tests run with pytest from a fresh venv that this
   script makes (so this machine's own pytest plugins play no part). Chosen because it is
   pure Python with no dependencies, its sdist ships its tests, they need nothing but a
   runner (they are stdlib ``unittest``), and they take a few seconds: ~660 tests and
   ~2,300 subtests that import a good part of the stdlib;
b. a metadata-heavy shell workload over 3,000 generated files in 100 folders: ``find``,
   ``stat``, ``cat`` and ``grep -r`` in one ``sh -c``;
c. ``gcc -O2 -c`` of a generated C file of ~690 lines (gcc, cc1 and as).

Each command runs bare (``subprocess.run``), through ``memotest.tracer.run.trace_command``
in this process (the tracer's own cost: shim, process watcher, reading the log and building
the trace, without memotest's Python start-up) and under ``strace -f -o /dev/null``,
interleaved round by round (the order rotates), after one warm-up run of each. The
medians are compared. ``python -m memotest trace -o /dev/null -- CMD`` end to end is
timed too, for information (it adds memotest's own start-up).

Goals: memotest/bare <= 1.10 on (a), <= 1.30 on (b), and memotest's overhead at least 5x
smaller than strace's ((strace - bare) / (memotest - bare) >= 5) on each workload. The
table's "cheaper" column is that quotient ("noise" when memotest's median is not above the
bare one); "cli" is the end-to-end ``memotest trace`` (median of 3).

Run: ``python benchmarks/trace_overhead.py [--wait-load SECONDS] [--keep]``. The machine's
load average is printed with the figures; ``--wait-load`` first waits (up to SECONDS) for
the 1-minute load average to drop below 1.5. Exit status 0 when every goal passed.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memotest.tracer.log import read as read_log  # noqa: E402
from memotest.tracer.run import TracedRun, trace_command  # noqa: E402

PACKAGE = "more-itertools"
VERSION = "10.5.0"
TEST_REQUIREMENTS = ["pytest"]

TREE_TOP = 10
TREE_SUB = 10
TREE_FILES = 30  # per folder: 10 * 10 * 30 = 3,000 files
C_FUNCTIONS = 40  # 17 lines each

SECONDS_PER_WORKLOAD = 30.0  # the rounds of one workload (all three variants) take about this
MIN_REPS = 5
MAX_REPS = 40
CLI_REPS = 3
LOAD_LIMIT = 1.5

DEVNULL = subprocess.DEVNULL


@dataclass
class Workload:
    key: str
    name: str
    argv: list[str]
    cwd: str
    goal_ratio: float | None
    goal_vs_strace: float = 5.0
    times: dict[str, list[float]] = field(default_factory=dict)
    records: int = 0
    processes: int = 0

    def median(self, variant: str) -> float:
        return statistics.median(self.times[variant])


# ------------------------------------------------------------------- set-up


def setup_suite(work: Path) -> Workload:
    """Downloads and unpacks the sdist, makes a venv with the test requirements."""
    dl = work / "dl"
    dl.mkdir()
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "-q", "--no-deps"),
            *("--no-binary", ":all:", "-d", str(dl), f"{PACKAGE}=={VERSION}"),
        ],
        check=True,
        stdout=DEVNULL,
    )
    (sdist,) = dl.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    src = next(p for p in work.iterdir() if p.is_dir() and p.name.startswith(PACKAGE))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *TEST_REQUIREMENTS],
        check=True,
        stdout=DEVNULL,
    )
    argv = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    return Workload("a", f"{PACKAGE} {VERSION} tests (pytest)", argv, str(src), 1.10)


def setup_tree(work: Path) -> Workload:
    root = work / "tree"
    for i in range(TREE_TOP):
        for j in range(TREE_SUB):
            folder = root / f"d{i:02d}" / f"s{j:02d}"
            folder.mkdir(parents=True)
            for k in range(TREE_FILES):
                name = f"f{k:03d}.txt" if k % 3 else f"f{k:03d}.dat"
                body = "".join(f"line {n} of {i}/{j}/{k}\n" for n in range(8))
                if k == 7:
                    body += "needle\n"
                (folder / name).write_text(body)
    script = (
        "find . -type f | wc -l > /dev/null; "
        "find . -type f -exec stat -c '%s %Y %n' {} + > /dev/null; "
        "find . -name '*.txt' -exec cat {} + > /dev/null; "
        "grep -rl needle . > /dev/null; "
        "grep -rc line . > /dev/null"
    )
    name = f"sh: find/stat/cat/grep -r, {TREE_TOP * TREE_SUB * TREE_FILES} files"
    return Workload("b", name, ["sh", "-c", script], str(root), 1.30)


def setup_gcc(work: Path) -> Workload:
    folder = work / "cc"
    folder.mkdir()
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", ""]
    lines += ["struct item { int key; double value; char name[32]; };", ""]
    for i in range(C_FUNCTIONS):
        lines += [
            f"static int cmp{i}(const void *a, const void *b)",
            "{",
            "    const struct item *x = a, *y = b;",
            f"    return (x->key ^ {i}) - (y->key ^ {i});",
            "}",
            "",
            f"double work{i}(struct item *items, size_t n)",
            "{",
            "    double sum = 0;",
            f"    qsort(items, n, sizeof *items, cmp{i});",
            "    for (size_t k = 0; k < n; k++) {",
            f'        snprintf(items[k].name, sizeof items[k].name, "%d-{i}", items[k].key);',
            "        sum += items[k].value * strlen(items[k].name);",
            "    }",
            "    return sum;",
            "}",
            "",
        ]
    (folder / "unit.c").write_text("\n".join(lines) + "\n")
    argv = ["gcc", "-O2", "-c", "unit.c", "-o", "unit.o"]
    return Workload("c", f"gcc -O2 -c ({len(lines)} lines)", argv, str(folder), None)


# ---------------------------------------------------------------- variants


def run_bare(w: Workload) -> None:
    proc = subprocess.run(w.argv, cwd=w.cwd, stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"{w.name}: exit status {proc.returncode}")


def run_memotest(w: Workload) -> None:
    t = trace_command(w.argv, cwd=w.cwd, stdout=DEVNULL, stderr=DEVNULL)
    if t.exit_code != 0 or not t.complete:
        raise SystemExit(f"{w.name}: traced run failed: {t.exit_code} {t.incomplete}")


def run_strace(w: Workload) -> None:
    argv = ["strace", "-f", "-o", "/dev/null", *w.argv]
    proc = subprocess.run(argv, cwd=w.cwd, stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"{w.name}: exit status {proc.returncode} under strace")


def run_cli(w: Workload) -> None:
    argv = [sys.executable, "-m", "memotest", "trace", "-o", "/dev/null", "--", *w.argv]
    proc = subprocess.run(argv, cwd=w.cwd, stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"{w.name}: memotest trace exit status {proc.returncode}")


VARIANTS: dict[str, Callable[[Workload], None]] = {
    "bare": run_bare,
    "memotest": run_memotest,
    "strace": run_strace,
}


def timed(fn: Callable[[Workload], None], w: Workload) -> float:
    t0 = time.perf_counter()
    fn(w)
    return time.perf_counter() - t0


def count_records(w: Workload) -> None:
    """Shim records and processes of one traced run (not a timed one)."""
    with TracedRun(w.argv, cwd=w.cwd, stdout=DEVNULL, stderr=DEVNULL) as run:
        run.start()
        run.wait()
        events, _ = read_log(run.log_path)
        trace = run.finish()
    w.records = len(events)
    w.processes = len(trace.processes)


def measure(w: Workload) -> None:
    for fn in VARIANTS.values():  # warm-up: page cache, .pyc files
        fn(w)
    count_records(w)
    round_s = sum(timed(fn, w) for fn in VARIANTS.values())
    reps = max(MIN_REPS, min(MAX_REPS, math.ceil(SECONDS_PER_WORKLOAD / round_s)))
    names = list(VARIANTS)
    w.times = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % 3 :] + names[: r % 3]:
            w.times[name].append(timed(VARIANTS[name], w))
    w.times["cli"] = [timed(run_cli, w) for _ in range(CLI_REPS)]


# ------------------------------------------------------------------ report


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def wait_for_load(limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while True:
        if os.getloadavg()[0] < LOAD_LIMIT:
            return True
        if time.monotonic() >= deadline:
            return False
        print(f"  load average {load()}: waiting for the 1-minute figure < {LOAD_LIMIT}")
        time.sleep(min(30.0, max(1.0, deadline - time.monotonic())))


def cheaper(w: Workload) -> str:
    """(strace - bare) / (memotest - bare), or "noise" when memotest's median is not above
    the bare one."""
    bare = w.median("bare")
    over_m, over_s = w.median("memotest") - bare, w.median("strace") - bare
    return f"{over_s / over_m:.1f}x" if over_m > 0 else "noise"


def report(works: list[Workload]) -> bool:
    ok = True
    head = (
        f"{'workload':<44} {'n':>3} {'bare s':>7} {'memo s':>7} {'strace s':>8} "
        f"{'memo/bare':>9} {'strace/bare':>11} {'cheaper':>9} {'cli s':>6} {'cli/bare':>8}"
    )
    print(head)
    print("-" * len(head))
    for w in works:
        bare, memo, strace = w.median("bare"), w.median("memotest"), w.median("strace")
        cli = w.median("cli")
        print(
            f"({w.key}) {w.name:<40} {len(w.times['bare']):>3} {bare:7.3f} {memo:7.3f} "
            f"{strace:8.3f} {memo / bare:9.3f} {strace / bare:11.3f} {cheaper(w):>9} "
            f"{cli:6.3f} {cli / bare:8.3f}"
        )
    print()
    for w in works:
        bare, memo, strace = w.median("bare"), w.median("memotest"), w.median("strace")
        over_m, over_s = memo - bare, strace - bare
        print(
            f"({w.key}) {w.records} shim records, {w.processes} processes; "
            f"overhead memotest {over_m * 1000:+.0f} ms, strace {over_s * 1000:+.0f} ms"
        )
    print()
    for w in works:
        bare, memo, strace = w.median("bare"), w.median("memotest"), w.median("strace")
        over_m, over_s = memo - bare, strace - bare
        if w.goal_ratio is not None:
            good = memo / bare <= w.goal_ratio
            ok &= good
            print(
                f"goal ({w.key}) memotest/bare <= {w.goal_ratio:.2f}: {memo / bare:.3f} "
                f"{'PASS' if good else 'FAIL'}"
            )
        good = over_m <= 0 or over_s / over_m >= w.goal_vs_strace
        ok &= good
        print(
            f"goal ({w.key}) overhead >= {w.goal_vs_strace:.0f}x cheaper than strace: "
            f"{cheaper(w)} {'PASS' if good else 'FAIL'}"
        )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wait-load", type=float, default=0.0, metavar="SECONDS")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    if not shutil.which("strace"):
        print("strace is needed (apt-get install -y strace)", file=sys.stderr)
        return 2

    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="memotest-overhead-"))
    try:
        print(f"set-up in {work}")
        works = [setup_suite(work), setup_tree(work), setup_gcc(work)]
        print(f"set-up done in {time.monotonic() - started:.0f} s")
        if args.wait_load > 0 and not wait_for_load(args.wait_load):
            print(f"the load average stayed >= {LOAD_LIMIT}: measuring anyway")
        cores = os.cpu_count()
        load_before = load()
        for w in works:
            measure(w)
        print()
        print(
            f"{cores} cores; load average (1, 5, 15 min) before {load_before}, after {load()}; "
            f"python {sys.version.split()[0]}; {time.monotonic() - started:.0f} s in all"
        )
        print()
        ok = report(works)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
