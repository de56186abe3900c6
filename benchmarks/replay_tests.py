"""The replay's test-level check (issue 18): every test's outcome, not only every file's.

The lanes write JUnit XML (pytest's own ``--junitxml`` for RetestAll, each file alone, and
for one-process pytest; memotest's ``--junit-xml``, whose test cases are pytest's own
elements, replayed ones marked ``memotest.cached``). A test is named as pytest's JUnit
names it (``classname::name``), the same in every lane.

The rule (the issue's goal): every test that fails under one-process pytest is run and fails
under memotest, or it fails in a file that is order-dependent, listed as such. memotest runs
each file alone, so the reference is two-sided:

* a test failing in the pytest session but passing with its file alone (RetestAll) depends
  on what another file's tests did first: an order difference across files, listed;
* a test failing with its file alone must fail under memotest: if memotest replayed it as
  passing, or ran it and it passed, that is a **disagreement** — unless memotest ran only
  part of the file (``--select tests``) and the test, run, passed: then the file is
  order-dependent within itself (the test fails after its file's other tests), listed as
  such, and it is exactly what keeps test-level selection opt-in.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

#: The order of precedence when one test has several cases (a call failure and a teardown
#: error are two elements in pytest's JUnit XML).
RANK = {"failed": 3, "skipped": 1, "passed": 0}


def outcomes(path: Path) -> dict[str, dict]:
    """``{test: {"outcome": passed|failed|skipped, "cached": bool|None}}`` from a JUnit
    XML file; empty when the file is missing or unreadable (a run that wrote none)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    out: dict[str, dict] = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        cached = None
        for prop in case.iter("property"):
            if prop.get("name") == "memotest.cached":
                cached = prop.get("value") == "true"
        seen = out.get(name)
        if seen is None or RANK[outcome] > RANK[seen["outcome"]]:
            out[name] = {"outcome": outcome, "cached": cached}
    return out


def merged(paths: list[Path]) -> dict[str, dict]:
    """The outcomes of several JUnit files (RetestAll: one per test file)."""
    out: dict[str, dict] = {}
    for p in paths:
        out.update(outcomes(p))
    return out


def failing(tests: dict[str, dict]) -> list[str]:
    return sorted(t for t, o in tests.items() if o["outcome"] == "failed")


def counts(tests: dict[str, dict]) -> dict:
    """How many tests a memotest lane ran (not replayed), of how many."""
    return {
        "tests": len(tests),
        "tests_run": sum(1 for o in tests.values() if o["cached"] is not True),
    }


def compare(alone: dict[str, dict], session_failing: list[str], lane: dict[str, dict]) -> dict:
    """The test-level agreement of one memotest lane (see the module doc). ``alone``: the
    outcomes with each file alone (RetestAll); ``session_failing``: the tests failing in
    the one-process pytest session; ``lane``: memotest's outcomes."""
    disagreements, within, extra = [], [], []
    for test in failing(alone):
        got = lane.get(test)
        if got is None:
            disagreements.append({"test": test, "memotest": "missing"})
        elif got["outcome"] != "failed":
            if got["cached"] is False and got["outcome"] == "passed" and partial(test, lane):
                within.append(test)
            else:
                how = "replayed" if got["cached"] else "ran"
                disagreements.append({"test": test, "memotest": f"{how} {got['outcome']}"})
    for test, got in lane.items():
        if got["outcome"] == "failed" and alone.get(test, {}).get("outcome") != "failed":
            extra.append(test)
    across = sorted(
        t for t in session_failing if alone.get(t, {}).get("outcome") in ("passed", None)
    )
    return {
        "disagreements": disagreements,
        "order_within_file": within,
        "order_across_files": across,
        "extra_failures": sorted(extra),
    }


def partial(test: str, lane: dict[str, dict]) -> bool:
    """Whether memotest replayed some of the tests of ``test``'s module while running it
    (a part of its file ran: ``--select tests``)."""
    module = test.split("::", 1)[0].split(".")
    for other, got in lane.items():
        if got["cached"] and other.split("::", 1)[0].split(".")[: len(module)] == module:
            return True
    return False
