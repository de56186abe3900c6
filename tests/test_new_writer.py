"""A new writer within one build (``Conflicts.recheck_replays``): a target edited to write
a file that a cached target reads makes that reader run in the same build, after it."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from conftest import build_statuses, memotest

PY = sys.executable

READER = """
    import time
    assert open('data.txt').read() == 'old', 'data.txt was rewritten'
    open('reader.log', 'a').write(repr(time.time()) + chr(10))
"""


def write_targets(root: Path, writer: str) -> None:
    (root / "memotest.toml").write_text(
        f"[targets.a]\ncommand = [{PY!r}, '-c', {textwrap.dedent(writer)!r}]\n"
        f"[targets.b]\ncommand = [{PY!r}, '-c', {textwrap.dedent(READER)!r}]\n"
    )


def test_a_cached_reader_of_what_an_edited_target_now_writes_runs_after_it(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "data.txt").write_text("old")
    write_targets(root, "open('other.txt', 'w').write('x')")
    _code, out, st = build_statuses(root, "-j", "2")
    assert st == {"a": "passed", "b": "passed"}, out
    write_targets(root, "import time; time.sleep(1); open('data.txt', 'w').write('new')")
    _code, out, st = build_statuses(root, "-j", "2")
    assert st == {"a": "passed", "b": "failed"}, out
    assert "data.txt" in out
    # The next build: b's record is of the run after a, and data.txt is as a left it.
    _code, out, st = build_statuses(root, "-j", "2")
    assert st == {"a": "cached", "b": "failed"}, out


def test_a_cached_reader_whose_input_a_run_rewrote_unchanged_stays_cached(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "data.txt").write_text("old")
    write_targets(root, "open('other.txt', 'w').write('x')")
    assert build_statuses(root)[2] == {"a": "passed", "b": "passed"}
    write_targets(root, "open('data.txt', 'w').write('old')")
    _code, out, st = build_statuses(root)
    assert st == {"a": "passed", "b": "cached"}, out


def test_a_replay_run_again_counts_once_with_its_final_result(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "data.txt").write_text("old")
    write_targets(root, "open('other.txt', 'w').write('x')")
    assert build_statuses(root, "-j", "2")[2] == {"a": "passed", "b": "passed"}
    write_targets(root, "import time; time.sleep(1); open('data.txt', 'w').write('new')")
    report = root / "r.json"
    proc = memotest("build", "-j", "2", "--json-report", str(report), cwd=root)
    out = proc.stdout.decode()
    data = json.loads(report.read_text())
    assert data["summary"]["total"] == 2, data["summary"]
    assert (data["summary"]["passed"], data["summary"]["failed"]) == (1, 1), data["summary"]
    assert data["summary"]["cached"] == 0, data["summary"]
    assert sorted((t["name"], t["status"]) for t in data["targets"]) == [
        ("a", "passed"),
        ("b", "failed"),
    ]
    assert "2 targets: 1 passed, 1 failed" in out, out
    # progress stays honest: the re-run is one more step, with why it runs
    assert "[3/3] FAILED b" in out and "replayed, then re-run" in out, out
    assert "/2]" not in out.split("[3/3]")[1], out
