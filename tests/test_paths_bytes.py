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


LIST_TOML = """
[settings]
pass_env = ["BYTES_VALUE"]

[targets.a]
command = ["python3", "-c", "import os; print(len(os.listdir('d')), os.environ['BYTES_VALUE'])"]
"""


def test_a_listing_and_a_variable_that_are_not_utf8(tmp_path: Path) -> None:
    """A folder holding an entry that is not UTF-8 is listed, recorded and explained; a
    passed variable whose value is not UTF-8 is keyed by its bytes (it crashed the key)."""
    root = write_tree(tmp_path / "p", {"memotest.toml": LIST_TOML, "d/ok": ""})
    open(os.path.join(os.fsencode(root), b"d", b"y\xff"), "wb").close()
    env = dict(os.environ)
    env["BYTES_VALUE"] = os.fsdecode(b"v\xff")
    code, out, st = build_statuses(root, env=env)
    assert "Traceback" not in out and code == 0 and st == {"a": "passed"}, out
    code, out, st = build_statuses(root, env=env)
    assert code == 0 and st == {"a": "cached"}, out

    open(os.path.join(os.fsencode(root), b"d", b"z\xfe"), "wb").close()
    proc = memotest("explain", "a", cwd=root, env=env)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"gained entries: z\\xfe" in proc.stdout, proc.stdout
    code, out, st = build_statuses(root, env=env)
    assert code == 0 and st == {"a": "passed"}, out
    assert build_statuses(root, env=env)[2] == {"a": "cached"}

    env["BYTES_VALUE"] = os.fsdecode(b"v\xfe")  # another value: another key
    code, out, st = build_statuses(root, "-v", env=env)
    assert code == 0 and st == {"a": "passed"} and "environment changed: BYTES_VALUE" in out, out
