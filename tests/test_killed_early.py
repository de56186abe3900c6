"""An image killed before its first call into the C library did not run without the shim
(``tracer/collect.py``, the shim's ``H`` and ``G`` records). Real programs, the real shim.

The case it is for: a test starts a pager (``less``) and kills it at once. The kill lands
before the shim announces the new image, which was reported as "the program ran without
the shim", so the target was never reusable.
"""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import build_statuses, trace, write_tree

PY = sys.executable
SLEEP = shutil.which("sleep") or "/bin/sleep"


def start_and_kill(exe: str, signal: str = "kill") -> str:
    """A Python script that starts ``exe`` and kills it at once, many times (so that at
    least some kills land before the new image's first call)."""
    return (
        "import subprocess\n"
        "for _ in range(20):\n"
        f"    p = subprocess.Popen([{exe!r}, '30'], stdin=subprocess.DEVNULL)\n"
        f"    p.{signal}()\n"
        "    assert p.wait() < 0\n"
    )


@pytest.mark.parametrize("signal", ["kill", "terminate"])
def test_a_dynamic_program_killed_at_once_leaves_the_trace_complete(tmp_path, signal):
    t = trace(PY, "-c", start_and_kill(SLEEP, signal), cwd=tmp_path)
    assert t["complete"] is True, t["incomplete"]
    assert any(p.endswith("/sleep") for p in t["execs"])  # its program is an input


def test_a_static_program_killed_at_once_still_makes_the_trace_incomplete(tmp_path, cprog):
    """A static program runs without the shim from its first instruction: killed or
    not, it may have done anything before."""
    exe = cprog("static_reader", static=True)
    t = trace(PY, "-c", start_and_kill(exe), cwd=tmp_path)
    assert t["complete"] is False
    assert any("statically linked" in i["reason"] for i in t["incomplete"])


def test_a_target_that_kills_its_pager_replays(tmp_path):
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": (
                f"[targets.pager]\ncommand = [{PY!r}, '-c', {start_and_kill(SLEEP)!r}]\n"
            )
        },
    )
    code, out, got = build_statuses(root, "-v")
    assert (code, got) == (0, {"pager": "passed"}), out
    assert "not cached" not in out, out
    assert build_statuses(root)[2] == {"pager": "cached"}
