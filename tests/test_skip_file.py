"""What the status lines say without ``-v``, and ``MEMOTEST_SKIP_FILE``: a command that
says it skipped is skipped, never a cached pass. Real memotest, real processes."""

from __future__ import annotations

import json
import sys

from conftest import build_statuses, memotest, write_tree

SKIPPER = """
[targets.maybe]
command = ["sh", "-c", "[ -e ready ] || echo 'no ready file' > \\"$MEMOTEST_SKIP_FILE\\""]

[targets.lying]
command = ["sh", "-c", "echo skip > \\"$MEMOTEST_SKIP_FILE\\"; exit 3"]
"""


def test_a_command_that_says_it_skipped_is_skipped_and_never_replayed(tmp_path):
    root = write_tree(tmp_path / "proj", {"memotest.toml": SKIPPER})
    junit = tmp_path / "junit.xml"
    for _ in range(2):
        code, out, st = build_statuses(root, "maybe", "--junit-xml", str(junit))
        assert code == 0, out
        assert st == {"maybe": "skipped"}, out
        assert "SKIPPED maybe (no ready file)" in out
        assert "<skipped" in junit.read_text()
    assert "last run was skipped" in memotest("explain", "maybe", cwd=root).stdout.decode()
    (root / "ready").write_text("")
    assert build_statuses(root, "maybe")[2] == {"maybe": "passed"}
    assert build_statuses(root, "maybe")[2] == {"maybe": "cached"}
    # A failure stays a failure, whatever the file says.
    code, out, st = build_statuses(root, "lying")
    assert code == 1 and st == {"lying": "failed"}, out


def test_why_a_pass_is_not_cached_shows_without_verbose(tmp_path):
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": '[targets.bump]\ncommand = ["sh", "-c", "cat n; echo 1 >> n"]\n',
            "n": "0\n",
        },
    )
    report = tmp_path / "r.json"
    proc = memotest("build", "--json-report", str(report), cwd=root)
    out = proc.stdout.decode()
    assert json.loads(report.read_text())["targets"][0]["status"] == "passed"
    line = next(ln for ln in out.splitlines() if "not cached" in ln)
    assert "was read and then written" in line and len(line) < 150, out


def test_the_skip_file_is_per_run_so_runs_still_share_a_warm_worker():
    from memotest.run.runner import SKIP_FILE
    from memotest.tracer.warm.spec import WarmSpec

    argv = [sys.executable, "-m", "pytest"]
    a, b = ({"PATH": "/bin", SKIP_FILE: f"/tmp/run{n}/skip"} for n in (1, 2))
    assert WarmSpec.of(argv, ("pytest",), "/", a) == WarmSpec.of(argv, ("pytest",), "/", b)
