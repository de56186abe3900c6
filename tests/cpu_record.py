"""An opt-in per-test CPU recorder for finding what makes the suite slow.

With ``MEMOTEST_TEST_CPU=PATH`` set, each test (setup, call and teardown) appends one JSON
line to PATH: its node id, the wall time, and the CPU (user, sys) of the pytest process
that ran it, its own (``RUSAGE_SELF``) plus its reaped children's (``RUSAGE_CHILDREN``).
A process is counted once it and its parent are reaped: a daemon (a warm worker, a
server) that outlives the test is counted where it is reaped, or never.

``python tests/cpu_record.py PATH [N]`` ranks the files and the tests by CPU.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import forked_cli
import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    forked = forked_cli.children_cpu  # the memotest commands forked for this process
    return own.ru_utime + kids.ru_utime + forked[0], own.ru_stime + kids.ru_stime + forked[1]


class CpuRecorder:
    """Appends each test's CPU to ``path`` (one line per test, lines written whole)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        user0, sys0 = _cpu()
        wall0 = time.monotonic()
        yield
        user1, sys1 = _cpu()
        line = {
            "test": item.nodeid,
            "wall": round(time.monotonic() - wall0, 3),
            "user": round(user1 - user0, 3),
            "sys": round(sys1 - sys0, 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        }
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)


def register(config: pytest.Config) -> None:
    """Registers the recorder when ``MEMOTEST_TEST_CPU`` names a file."""
    path = os.environ.get("MEMOTEST_TEST_CPU")
    if path:
        config.pluginmanager.register(CpuRecorder(path), "memotest-test-cpu")


def rank(path: Path, top: int = 15) -> str:
    """The files and the tests of a recording, most CPU first."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for row in rows:
        f = files[row["test"].split("::")[0]]
        f[0] += row["user"] + row["sys"]
        f[1] += row["user"]
        f[2] += row["wall"]
        f[3] += 1
    total = sum(r["user"] + r["sys"] for r in rows)
    out = [
        f"{len(rows)} tests, CPU {total:.0f} s "
        f"(user {sum(r['user'] for r in rows):.0f}, sys {sum(r['sys'] for r in rows):.0f}), "
        f"summed wall {sum(r['wall'] for r in rows):.0f} s",
        f"{'cpu s':>7} {'user':>6} {'wall':>6} {'n':>4}  file",
    ]
    for name, (cpu, user, wall, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        out.append(f"{cpu:7.1f} {user:6.1f} {wall:6.1f} {n:4d}  {name}")
    out.append(f"{'cpu s':>7} {'wall':>6}  test")
    for row in sorted(rows, key=lambda r: -(r["user"] + r["sys"]))[:top]:
        out.append(f"{row['user'] + row['sys']:7.1f} {row['wall']:6.1f}  {row['test']}")
    return "\n".join(out)


if __name__ == "__main__":
    print(rank(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15))
