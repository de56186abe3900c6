"""``--pytest-split FILE=N`` (issue 18): one big test file as N targets, each a share of its
tests (round robin), each its own record run, replayed and reported per test; an edit of
the file re-runs every part, a failure shows in its part only; clear errors for a file
pytest did not collect and a bad count. Real pytest, real builds."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import build_statuses, memotest, write_tree

BIG = "".join(f"def test_{i}():\n    assert {i} >= 0\n\n" for i in range(6))
FILES = {
    "pytest.ini": "[pytest]\n",
    "tests/test_big.py": BIG,
    "tests/test_small.py": "def test_one():\n    pass\n",
}
PARTS = ("pytest:tests/test_big.py@1/2", "pytest:tests/test_big.py@2/2")
SPLIT = ("--pytest", "tests", "--pytest-split", "tests/test_big.py=2")


def ids_by_target(report: Path) -> dict[str, list[str]]:
    data = json.loads(report.read_text())
    return {t["name"]: [x["id"] for x in t.get("tests") or []] for t in data["targets"]}


def test_a_split_file_runs_as_parts_each_its_own_record(tmp_path):
    root = write_tree(tmp_path / "p", FILES)
    report = tmp_path / "r.json"
    rc, out, st = build_statuses(root, "-j2", *SPLIT, report=report)
    assert rc == 0 and st == dict.fromkeys([*PARTS, "pytest:tests/test_small.py"], "passed"), out
    proc = memotest("build", "-j2", "--json-report", str(report), *SPLIT, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = ids_by_target(report)
    big = "tests/test_big.py::test_"
    assert ids[PARTS[0]] == [f"{big}0", f"{big}2", f"{big}4"], ids
    assert ids[PARTS[1]] == [f"{big}1", f"{big}3", f"{big}5"], ids
    statuses = {t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]}
    assert set(statuses.values()) == {"cached"}, statuses
    # A failure in one part: that part fails, the other passes; both ran (same file).
    (root / "tests/test_big.py").write_text(BIG.replace("assert 3 >= 0", "assert 3 < 0"))
    rc, out, st = build_statuses(root, "-j2", *SPLIT)
    assert rc == 1 and st[PARTS[0]] == "passed" and st[PARTS[1]] == "failed", out
    assert st["pytest:tests/test_small.py"] == "cached", out
    # Unsplit again: the file is one target, which runs (it has no record).
    rc, out, st = build_statuses(root, "--pytest", "tests")
    assert st["pytest:tests/test_big.py"] == "failed" and not set(PARTS) & set(st), out


def test_split_errors_are_clear(tmp_path):
    root = write_tree(tmp_path / "p", FILES)
    for value, says in (
        ("tests/test_nope.py=2", "is not a test file pytest collected"),
        ("tests/test_big.py=1", "expected FILE=N"),
        ("tests/test_big.py=x", "expected FILE=N"),
        ("tests/test_big.py", "expected FILE=N"),
    ):
        rc, out, _ = build_statuses(root, "--pytest", "tests", "--pytest-split", value)
        assert rc == 2 and says in out and "Traceback" not in out, (value, out)
