"""Per-test results of ``--pytest`` targets (issue 18, part 1), on real pytest runs: each
test's outcome recorded with the target's record and replayed, the JSON report's
``tests``, JUnit XML with one case per test named and filled exactly as pytest's own
``--junitxml`` does, the summary's test counts, ``show --tests``, warm and ``--no-warm``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from memotest.run.testcases import TestOutcome, decode, encode
from tests.conftest import memotest, write_tree

FILES = {
    "pytest.ini": "[pytest]\njunit_family = xunit1\n",
    "tests/test_mixed.py": """\
        import pytest

        def test_pass():
            pass

        def test_fail():
            assert 1 == 2

        @pytest.mark.skip(reason="not today")
        def test_skip():
            pass

        @pytest.mark.xfail(reason="known bug")
        def test_xfail():
            assert 0

        @pytest.mark.xfail
        def test_xpass():
            pass

        @pytest.fixture
        def boom():
            raise RuntimeError("setup boom")

        def test_error(boom):
            pass

        @pytest.mark.parametrize("x", ["a b", "c::d", "e/[f]", "g.h"])
        def test_param(x):
            pass

        class TestKlass:
            def test_method(self):
                assert "x" == "y"
    """,
    "tests/test_ok.py": """\
        import os
        import subprocess
        import sys

        import pytest

        def test_one():
            pass

        @pytest.mark.skip(reason="later")
        def test_two():
            pass

        def test_inner_pytest_writes_elsewhere():
            # A pytest the test starts itself must not add to this run's results.
            assert "MEMOTEST_TEST_RESULTS" not in os.environ
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "memotest_pytest.narrow",
                   "-p", "no:cacheprovider", "inner/check_inner.py"]
            subprocess.run(cmd, check=True, capture_output=True)
    """,
    "inner/check_inner.py": "def test_inner():\n    pass\n",
    "tests/test_broken.py": "import no_such_module_anywhere\n",
}

OUTCOMES = {
    "tests/test_mixed.py::test_pass": "passed",
    "tests/test_mixed.py::test_fail": "failed",
    "tests/test_mixed.py::test_skip": "skipped",
    "tests/test_mixed.py::test_xfail": "xfailed",
    "tests/test_mixed.py::test_xpass": "xpassed",
    "tests/test_mixed.py::test_error": "error",
    "tests/test_mixed.py::test_param[a b]": "passed",
    "tests/test_mixed.py::test_param[c::d]": "passed",
    "tests/test_mixed.py::test_param[e/[f]]": "passed",
    "tests/test_mixed.py::test_param[g.h]": "passed",
    "tests/test_mixed.py::TestKlass::test_method": "failed",
    "tests/test_ok.py::test_one": "passed",
    "tests/test_ok.py::test_two": "skipped",
    "tests/test_ok.py::test_inner_pytest_writes_elsewhere": "passed",
    "tests/test_broken.py": "error",
}


def _build(root: Path, *args: str) -> tuple[str, dict, ET.Element]:
    report, junit = root.parent / "report.json", root.parent / "junit.xml"
    proc = memotest(
        "build", "--json-report", str(report), "--junit-xml", str(junit), *args, "--pytest",
        cwd=root, timeout=300,
    )  # fmt: skip
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 1, out  # test_mixed and test_broken fail
    return out, json.loads(report.read_text()), ET.parse(junit).getroot()


def _tests(report: dict) -> dict[str, dict]:
    return {t["id"]: t for target in report["targets"] for t in target.get("tests", [])}


def _case_key(case: ET.Element) -> tuple[str, ...]:
    """A case's names (and, with ``junit_family = xunit1``, its file and line)."""
    return tuple(case.get(a, "") for a in ("classname", "name", "file", "line"))


def _content(case: ET.Element) -> list[tuple]:
    """What a test case says besides its time and memotest's property (object addresses
    in failure texts blanked)."""
    out = []
    for child in case:
        if child.tag == "properties":
            continue
        text = re.sub(r"0x[0-9a-f]+", "0x", child.text or "")
        out.append((child.tag, child.get("type"), child.get("message"), text))
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return write_tree(tmp_path_factory.mktemp("pertest") / "proj", FILES)


def test_recorded_reported_and_replayed(project: Path) -> None:
    out, report, junit = _build(project)
    tests = _tests(report)
    assert {k: v["status"] for k, v in tests.items()} == OUTCOMES, out
    assert not any(t["cached"] for t in tests.values())
    assert all(isinstance(t["duration"], float) for t in tests.values())
    assert "inner/check_inner.py::test_inner" not in tests
    assert re.search(r"15 tests: 7 passed, 2 failed, 2 skipped, 2 error, 1 xfailed, 1 xpassed", out)

    # JUnit: one case per test, named and filled as pytest's own --junitxml writes them.
    own = project.parent / "own.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--continue-on-collection-errors", f"--junitxml={own}", "tests"],
        cwd=project, capture_output=True, timeout=300,
    )  # fmt: skip
    theirs = {_case_key(c): _content(c) for c in ET.parse(own).getroot().iter("testcase")}
    cases = list(junit.iter("testcase"))
    mine = {_case_key(c): _content(c) for c in cases}
    assert mine == theirs
    names = {key[:2] for key in mine}
    assert ("tests.test_mixed.TestKlass", "test_method") in names
    assert ("tests.test_mixed", "test_param[c::d]") in names
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props == {"memotest.cached": "false"}
    suite = junit.find("testsuite")
    assert suite is not None and suite.get("tests") == str(len(cases))

    # The passing file is replayed with its tests, cached; the failing ones run again.
    out, report, junit = _build(project)
    tests = _tests(report)
    assert {k: v["status"] for k, v in tests.items()} == OUTCOMES, out
    ok = {k: v["cached"] for k, v in tests.items() if k.startswith("tests/test_ok.py")}
    assert ok and all(ok.values()), out
    assert not any(v["cached"] for k, v in tests.items() if "test_mixed" in k)
    cached = {
        _case_key(c)[:2]: c.find("properties/property").get("value")  # type: ignore[union-attr]
        for c in junit.iter("testcase")
    }
    assert cached[("tests.test_ok", "test_one")] == "true"
    assert cached[("tests.test_mixed", "test_pass")] == "false"

    # show --tests, and -v with the failure text.
    proc = memotest("show", "--tests", "-v", "pytest:tests/test_mixed.py", cwd=project)
    shown = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert re.search(r"^FAILED +tests/test_mixed.py::test_fail \d+\.\d+s$", shown, re.M)
    assert "assert 1 == 2" in shown
    assert re.search(r"^XFAILED +tests/test_mixed.py::test_xfail", shown, re.M)
    assert "11 tests: 5 passed, 2 failed, 1 skipped, 1 error, 1 xfailed, 1 xpassed" in shown


def test_fresh_runs_report_their_tests_too(project: Path) -> None:
    out, report, _junit = _build(project, "--no-warm")
    tests = _tests(report)
    mixed = {k: v["status"] for k, v in tests.items() if "test_mixed" in k}
    assert mixed == {k: v for k, v in OUTCOMES.items() if "test_mixed" in k}, out
    assert tests["tests/test_broken.py"]["status"] == "error"


def test_outcome_round_trip() -> None:
    t = TestOutcome("a.py::t[x]", "failed", 0.5, "E boom", "a", "t[x]", ("<testcase/>",))
    assert TestOutcome.from_json(json.loads(json.dumps(t.as_json()))) == t
    assert decode(encode([t, t.as_cached()])) == [t, t]
    with pytest.raises(ValueError):
        TestOutcome.from_json({"id": "x", "outcome": "exploded"})
