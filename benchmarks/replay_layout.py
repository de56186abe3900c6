"""Commit-level replay of a project that keeps its pytest configuration in ``tests/``.

Issue 30: with ``tests/pytest.ini`` pytest's rootdir (where memotest's targets run) is
``tests/``, while the package lives at the repository's root; memotest used to note no
Python file of such a project by the code that ran, so a docstring typo re-ran nearly
every file. This lays out a synthetic project that way (``lib/`` at the root, found
through the ini's ``pythonpath = ..``; a module per area, each with a class and a few
functions; a test file per function), then replays a history of commits, each an edit a
project's history is full of, building after each with ``memotest build --pytest tests``
and checking the outcome against RetestAll (each test file alone, ``python -m pytest``):
every file that fails alone must have run and failed under memotest.

Prints, per commit, the files memotest re-ran of all, how many of them because the
modification-time order of what they stat'ed changed (their first reason), and the
disagreements::

    python benchmarks/replay_layout.py            # 8 modules x 4 functions: 32 test files
    python benchmarks/replay_layout.py --quick    # 3 x 3: 9 test files

Exit status 0 when there is no disagreement, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULE = '''"""Area {m}."""

import abc


def helper_{m}(x):
    """Helps."""
    return x + {m}
{functions}

class Thing{m}(metaclass=abc.ABCMeta):
    """A thing."""

    limit = {m}

    @property
    def size(self):
        return self.limit
'''

FUNCTION = '''

def f{m}_{k}(x):
    """Computes {k}."""
    return helper_{m}(x) * {k}
'''

TEST = """from lib import m{m}


def test_f{m}_{k}():
    assert m{m}.f{m}_{k}(1) == ({m} + 1) * {k}
"""


def layout(root: Path, modules: int, functions: int) -> list[str]:
    """Writes the project; returns its test files (relative to ``tests/``)."""
    (root / "lib").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "tests" / "pytest.ini").write_text("[pytest]\npythonpath = ..\n")
    (root / "lib" / "__init__.py").write_text("")
    tests = []
    for m in range(modules):
        funcs = "".join(FUNCTION.format(m=m, k=k) for k in range(1, functions + 1))
        (root / "lib" / f"m{m}.py").write_text(MODULE.format(m=m, functions=funcs))
        for k in range(1, functions + 1):
            name = f"test_m{m}_f{k}.py"
            (root / "tests" / name).write_text(TEST.format(m=m, k=k))
            tests.append(name)
    return tests


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1))


def commits(modules: int) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The history: (what the commit does, [(file, old, new), ...])."""
    last = modules - 1
    return [
        (
            "docstring typo in two modules",
            [
                ("lib/m0.py", '"""Computes 1."""', '"""Computes one."""'),
                (f"lib/m{last}.py", '"""A thing."""', '"""A thing!"""'),
            ],
        ),
        ("a blank line above the imports", [("lib/m1.py", '"""Area 1."""\n', '"""Area 1."""\n\n')]),
        ("a line above a class", [("lib/m0.py", "\nclass Thing0", "\n# things\nclass Thing0")]),
        ("an edit inside one function", [("lib/m0.py", "* 1\n", "* 1 + 0\n")]),
        (
            "a bug in one function",
            [("lib/m1.py", "return helper_1(x) * 2", "return helper_1(x) * 3")],
        ),
        ("the bug fixed", [("lib/m1.py", "return helper_1(x) * 3", "return helper_1(x) * 2")]),
        ("a helper every function calls", [("lib/m0.py", "return x + 0", "return x + 0 * 1")]),
        (
            "a comment at the end",
            [
                (
                    f"lib/m{last}.py",
                    "        return self.limit\n",
                    "        return self.limit  # the limit\n",
                )
            ],
        ),
    ]


#: Targets that re-ran because the modification-time order of what they stat'ed changed
#: (issue 25), by file, from the last :func:`build`.
BY_ORDER: set[str] = set()


def build(root: Path, *options: str) -> dict[str, str]:
    """``memotest build --pytest tests``: each target's status."""
    report = root.parent / "report.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "memotest",
            "build",
            "-j2",
            *options,
            "--json-report",
            str(report),
            "--pytest",
            "tests",
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    data = json.loads(report.read_text())
    BY_ORDER.clear()
    BY_ORDER.update(
        t["name"] for t in data["targets"] if "modification-time order" in str(t.get("reason"))
    )
    # Targets are named from the repository (pytest:tests/test_x.py); the files from tests/.
    return {
        os.path.relpath(t["name"].split(":", 1)[1], "tests"): t["status"] for t in data["targets"]
    }


def retest_all(root: Path, tests: list[str]) -> set[str]:
    """The test files that fail alone."""
    failing = set()
    for name in tests:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
            cwd=root / "tests",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if proc.returncode != 0:
            failing.add(name)
    return failing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 modules x 3 functions")
    ap.add_argument(
        "--whole-files",
        action="store_true",
        help="hold every Python file whole: what memotest did with this layout before issue 30",
    )
    args = ap.parse_args()
    options = ("--whole-files",) if args.whole_files else ()
    modules, functions = (3, 3) if args.quick else (8, 4)
    with tempfile.TemporaryDirectory(prefix="memotest-layout-") as tmp:
        root = Path(tmp) / "repo"
        tests = layout(root, modules, functions)
        started = time.monotonic()
        first = build(root, *options)
        print(
            f"{len(tests)} test files, first build: {len(first)} run "
            f"({time.monotonic() - started:.1f}s)"
        )
        print(f"{'commit':40} {'re-run':>9} {'by the order':>13} {'disagreements':>14}")
        bad = 0
        for what, edits in commits(modules):
            for rel, old, new in edits:
                edit(root, rel, old, new)
            statuses = build(root, *options)
            ran = sorted(n for n, s in statuses.items() if s != "cached")
            failing = retest_all(root, tests)
            missed = sorted(n for n in failing if statuses.get(n) != "failed")
            bad += len(missed)
            print(
                f"{what:40} {len(ran):>4}/{len(tests):<4} {len(BY_ORDER):>13} {len(missed):>14}",
                flush=True,
                end="",
            )
            print(f"  missed: {', '.join(missed)}" if missed else "", flush=True)
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
