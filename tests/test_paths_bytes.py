"""Paths are bytes on Linux: a path that is not UTF-8 is stored and reported losslessly.

A target reads a real file whose name holds the byte ``\\xff`` and looks up a missing one:
it builds, records, replays, and is re-run when the file changes; ``explain`` prints the
path with a backslash escape and the JSON and JUnit reports carry it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.etree import ElementTree as ET

from conftest import build_statuses, memotest, write_tree

CODE = (
    "import os; print(open(os.fsdecode(b'f\\\\xff.txt')).read());"
    " print(os.path.exists(os.fsdecode(b'm\\\\xff')))"
)
TOML = f"""
[targets.a]
command = ["python3", "-c", "{CODE}"]
"""


def test_a_path_that_is_not_utf8_is_recorded_replayed_and_reported(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", {"memotest.toml": TOML})
    real = os.path.join(os.fsencode(root), b"f\xff.txt")
    with open(real, "wb") as f:
        f.write(b"one")
    os.utime(real, (1_600_000_000, 1_600_000_000))
    code, out, st = build_statuses(root)
    assert "Traceback" not in out and code == 0 and st == {"a": "passed"}, out
    code, out, st = build_statuses(root)
    assert code == 0 and st == {"a": "cached"}, out

    proc = memotest("show", "a", "--paths", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert b"f\\xff.txt" in proc.stdout and b"m\\xff" in proc.stdout, proc.stdout

    with open(real, "wb") as f:
        f.write(b"two")
    proc = memotest("explain", "a", cwd=root)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"f\\xff.txt" in proc.stdout, proc.stdout
    proc.stdout.decode("utf-8")  # valid text

    report = tmp_path / "r.json"
    junit = tmp_path / "r.xml"
    proc = memotest(
        "build", "--json-report", str(report), "--junit-xml", str(junit), "-v", cwd=root
    )
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    (target,) = json.loads(report.read_text())["targets"]
    assert target["status"] == "passed"
    assert b"f\xff.txt" in os.fsencode(target["reason"]), target  # lossless
    ET.parse(junit)  # well-formed
    code, out, st = build_statuses(root)
    assert code == 0 and st == {"a": "cached"}, out

    with open(os.path.join(os.fsencode(root), b"m\xff"), "wb") as f:
        f.write(b"")
    code, out, st = build_statuses(root)
    assert "Traceback" not in out and st == {"a": "passed"}, out  # the missing one appeared


def test_trace_json_carries_a_path_that_is_not_utf8(tmp_path: Path) -> None:
    write_tree(tmp_path, {"x": ""})
    code = "import os; print(os.path.exists(os.fsdecode(b'm\\xff')))"
    proc = memotest("trace", "--", "python3", "-c", code, cwd=tmp_path)
    assert b"Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    paths = json.dumps(data)
    assert "m\\udcff" in paths, paths  # json's escape of the byte, lossless
