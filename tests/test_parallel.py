"""Dependency-safe parallel batches: planted ElectricTest patterns under -j4."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import memotest

PY = sys.executable

# Each planted target is a small script; targets-file order is the serial order.
SCRIPTS = {
    # A writes the fixture B reads.
    "a.py": """
        import time
        time.sleep(0.15)
        open('fixture.json', 'w').write('{"from": "a"}')
    """,
    # B needs A's fixture (and would see C's if C ran between A and B).
    "b.py": """
        import json
        data = json.load(open('fixture.json'))
        assert data == {"from": "a"}, data
    """,
    # C overwrites what B read.
    "c.py": """
        open('fixture.json', 'w').write('{"from": "c"}')
    """,
    # D and E append to one log: their lines must never interleave.
    "append.py": """
        import sys, time
        who = sys.argv[1]
        with open('shared.log', 'a') as f:
            f.write(f'{who} start\\n'); f.flush()
            time.sleep(0.1)
            f.write(f'{who} end\\n')
    """,
    # F and G use one fixed name in the temp folder: the private TMPDIR keeps them apart.
    "tmp.py": """
        import os, sys, tempfile, time
        who = sys.argv[1]
        path = os.path.join(tempfile.gettempdir(), 'fixed-name.txt')
        open(path, 'w').write(who)
        time.sleep(0.1)
        assert open(path).read() == who
    """,
    # H and I are independent: they must be able to overlap.
    "stamp.py": """
        import os, sys, time
        out = sys.argv[2]
        open(os.path.join(out, sys.argv[1] + '.start'), 'w').write(repr(time.time()))
        time.sleep(0.4)
        open(os.path.join(out, sys.argv[1] + '.end'), 'w').write(repr(time.time()))
    """,
}


@pytest.fixture
def planted(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    for name, text in SCRIPTS.items():
        (root / name).write_text(textwrap.dedent(text))
    (root / "memotest.toml").write_text(
        textwrap.dedent(f"""
        [targets.a]
        command = ["{PY}", "a.py"]
        [targets.b]
        command = ["{PY}", "b.py"]
        [targets.c]
        command = ["{PY}", "c.py"]
        [targets.d]
        command = ["{PY}", "append.py", "d"]
        [targets.e]
        command = ["{PY}", "append.py", "e"]
        [targets.f]
        command = ["{PY}", "tmp.py", "f"]
        [targets.g]
        command = ["{PY}", "tmp.py", "g"]
        [targets.h]
        command = ["{PY}", "stamp.py", "h", "{stamps}"]
        [targets.i]
        command = ["{PY}", "stamp.py", "i", "{stamps}"]
    """)
    )
    return root, stamps


def build(root: Path, *args: str) -> tuple[int, str, dict]:
    report = root.parent / "report.json"
    proc = memotest("build", "--json-report", str(report), *args, cwd=root)
    return (
        proc.returncode,
        proc.stdout.decode() + proc.stderr.decode(),
        json.loads(report.read_text()),
    )


def log_is_not_interleaved(root: Path) -> None:
    lines = (root / "shared.log").read_text().splitlines()
    for start, end in zip(lines[::2], lines[1::2], strict=True):
        assert start.split()[0] == end.split()[0], lines
        assert (start.split()[1], end.split()[1]) == ("start", "end"), lines


def test_first_parallel_run_learns_the_edges_then_never_fails_at_j4(planted):
    # One project for both: the first, unscheduled run detects the hazards and learns the
    # edges; the next runs, scheduled by those edges, never fail.
    root, stamps = planted
    code, out, data = build(root, "-j", "4")
    assert code == 0, out
    assert {t["status"] for t in data["targets"]} == {"passed"}, out
    hazard_paths = {h["path"] for h in data["hazards"]}
    assert str(root / "fixture.json") in hazard_paths, data["hazards"]
    assert "hazard:" in out and "fixture.json" in out
    b = next(t for t in data["targets"] if t["name"] == "b")
    assert "re-run alone" in b["reason"]
    graph = json.loads(memotest("graph", "--format", "json", cwd=root).stdout)
    kinds = {(e["before"], e["after"]): e["kind"] for e in graph["edges"]}
    assert ("a", "b") in kinds and ("b", "c") in kinds
    assert ("d", "e") in kinds  # both append to shared.log
    assert ("h", "i") not in kinds and ("f", "g") not in kinds
    dot = memotest("graph", cwd=root).stdout.decode()  # the default format names the path
    assert dot.startswith("digraph memotest {")
    assert '"a" -> "b"' in dot and "fixture.json" in dot

    (root / "shared.log").unlink()  # it interleaved in that first, unscheduled run
    overlaps = 0
    for _ in range(5):  # a missing edge shows in most runs (a sleeps before it writes)
        code, out, data = build(root, "-j", "4", "--force")
        assert code == 0, out
        assert not data["hazards"], data["hazards"]
        assert {t["status"] for t in data["targets"]} == {"passed"}, out
        h0, h1, i0, i1 = (
            float((stamps / f"{n}.{e}").read_text())
            for n, e in (("h", "start"), ("h", "end"), ("i", "start"), ("i", "end"))
        )
        overlaps += h0 < i1 and i0 < h1
    log_is_not_interleaved(root)
    assert overlaps >= 3  # independent targets do run side by side


def test_exclusive_target_runs_alone(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    (tmp_path / "stamp.py").write_text(textwrap.dedent(SCRIPTS["stamp.py"]))
    toml = "".join(
        f'[targets.{n}]\ncommand = ["{PY}", "stamp.py", "{n}", "{stamps}"]\n'
        + ('tags = ["exclusive"]\n' if n == "x" else "")
        for n in ("p", "x", "q")
    )
    (tmp_path / "memotest.toml").write_text(toml)
    code, out, _ = build(tmp_path, "-j", "3")
    assert code == 0, out
    t = {
        n: (float((stamps / f"{n}.start").read_text()), float((stamps / f"{n}.end").read_text()))
        for n in ("p", "x", "q")
    }
    for other in ("p", "q"):
        assert t[other][1] <= t["x"][0] or t["x"][1] <= t[other][0], t


def test_make_jobserver_limits_concurrency(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "stamp.py").write_text(textwrap.dedent(SCRIPTS["stamp.py"]))
    (proj / "memotest.toml").write_text(
        "".join(
            f'[targets.t{i}]\ncommand = ["{PY}", "stamp.py", "t{i}", "{stamps}"]\n'
            for i in range(6)
        )
    )
    (proj / "Makefile").write_text(f"all:\n\t+{PY} -m memotest build -j 6 --no-cache\n")
    import subprocess

    proc = subprocess.run(["make", "-j2", "all"], cwd=proj, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    spans = [
        (float((stamps / f"t{i}.start").read_text()), float((stamps / f"t{i}.end").read_text()))
        for i in range(6)
    ]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    level = peak = 0
    for _, d in events:
        level += d
        peak = max(peak, level)
    assert peak == 2, spans
    assert b"jobserver" not in proc.stderr  # no token-count complaints from make


def test_a_hazard_between_runs_made_out_of_serial_order_says_so(tmp_path):
    """At -j1 the longest target runs first: ``b`` (serially after ``a``) wrote what ``a``
    then read. They did not run at once; the hazard says ``b`` ran before ``a``."""
    root = tmp_path / "order"
    root.mkdir()
    (root / "memotest.toml").write_text(
        f"[targets.a]\ncommand = [{PY!r}, 'a.py']\n[targets.b]\ncommand = [{PY!r}, 'b.py']\n"
    )
    (root / "a.py").write_text("import os; print(os.path.exists('x') and open('x').read())\n")
    b = "import os, time; time.sleep(1); os.path.exists('flag') and open('x', 'w').write('1')\n"
    (root / "b.py").write_text(b)
    code, out, _data = build(root, "-j", "1")
    assert code == 0, out
    (root / "flag").write_text("")  # b writes x now
    (root / "a.py").write_text((root / "a.py").read_text() + "# edited\n")
    code, out, data = build(root, "-j", "1", "-v")
    assert code == 0, out
    assert [(h["before"], h["after"], h["overlapped"]) for h in data["hazards"]] == [
        ("a", "b", False)
    ], out
    assert "hazard: b ran before a and they conflict on" in out, out
    reasons = {t["name"]: t["reason"] for t in data["targets"]}
    assert reasons["a"].startswith("re-run alone: ran after b"), out
    assert reasons["b"].startswith("re-run alone: ran before a"), out
