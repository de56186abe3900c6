"""Ranks the test suite's tests and files by CPU, from the lines of the suite's opt-in
recorder (tests/conftest.py: ``MEMOTEST_TEST_CPU=PATH pytest -n 3``).

    python benchmarks/suite_cpu.py PATH [--top N] [--tests]

Each line is one test: the CPU its pytest process spent on it, own and reaped children's
(a daemon counts when reaped, a session fixture against its first user).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--tests", action="store_true", help="rank tests, not files")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.path.read_text().splitlines() if line.strip()]
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for row in rows:
        key = row["test"] if args.tests else row["test"].split("::")[0]
        total = totals[key]
        total[0] += row["user"]
        total[1] += row["sys"]
        total[2] += row["wall"]
        total[3] += 1
    cpu = sum(row["user"] + row["sys"] for row in rows)
    print(f"{len(rows)} tests, {cpu:.1f} CPU-s (user + sys)")
    print(f"{'CPU-s':>8} {'user':>7} {'sys':>6} {'wall':>7} {'n':>4}  name")
    ranked = sorted(totals.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    for name, (user, system, wall, n) in ranked[: args.top]:
        print(f"{user + system:8.1f} {user:7.1f} {system:6.1f} {wall:7.1f} {n:4d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
