"""The outcome of each test of a run, for memotest (``memotest/run/testcases.py``).

memotest's runner names a file in each run's environment (``MEMOTEST_TEST_RESULTS``, in
the run's own folder: never an input nor an output of the target). When it is set,
:func:`start` (called by ``memotest_pytest.narrow``'s ``pytest_configure``) takes it out of
the environment, so that a pytest the tests start themselves does not write there too,
and registers a :class:`Recorder`, which writes one JSON object per test item at the end
of the session, in the order the items ran:

``{"id": NODEID, "outcome": OUTCOME, "duration": SECONDS, "longrepr": TEXT,
"classname": ..., "name": ..., "junit": [TESTCASE XML, ...]}``

``outcome`` is one of passed, failed, skipped, error (a failure in the item's setup or
teardown, or of its file's collection), xfailed or xpassed, as pytest's summary counts
them; ``duration`` the sum of the item's setup, call and teardown; ``longrepr`` the text
pytest shows for a failure (a skip's ``file:line: reason``, an xfail's reason).

The JUnit part is pytest's own: a second instance of pytest's ``LogXML``
(``_pytest/junitxml.py``), made from the same options and ini settings as ``--junitxml``
would be (``--junitprefix``, ``junit_family``, ``junit_logging``, ``junit_duration_report``,
``junit_log_passing_tests``), receives the same reports and names each test case as pytest's
own file would (``mangle_test_address``), with its failure, error, skip and captured output
elements; it writes no file. A file that failed to collect is the one error case pytest
writes for it. ``LogXML`` is not public API: with a pytest where it cannot be made, the
entries have no ``junit`` and memotest names them from the node id.

The keys are those of ``memotest.run.testcases.TestOutcome.as_json``: this module imports
nothing of memotest, since it runs in the tests' own process.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from typing import Any

import pytest

#: Must be ``memotest.run.testcases.RESULTS_ENV``.
RESULTS_ENV = "MEMOTEST_TEST_RESULTS"

#: How bad each outcome is: an item's outcome is the worst of its phases'.
_RANK = {"error": 3, "failed": 2}


def start(config: pytest.Config) -> None:
    """Registers a :class:`Recorder` when memotest named a results file (not in an xdist
    worker: the controller receives the workers' reports)."""
    path = os.environ.pop(RESULTS_ENV, None)
    if not path or hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(Recorder(config, path), "memotest-results")


def _phase_outcome(report: pytest.TestReport) -> str | None:
    """What one phase's report says of its item; None: nothing (a passing setup or teardown)."""
    xfail = hasattr(report, "wasxfail")
    if report.failed:
        return "failed" if report.when == "call" else "error"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    if report.when == "call":
        return "xpassed" if xfail else "passed"
    return None


def _text(report: Any) -> str:
    """The text pytest shows for a report that did not pass."""
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, line, reason = longrepr
        return f"{path}:{line}: {reason}"
    return str(longrepr) if longrepr is not None else ""


class Recorder:
    """Collects each item's reports and writes them as JSON lines at the session's end."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        self.path = path
        self.items: dict[str, dict[str, Any]] = {}
        self.xml = _junit(config)
        if self.xml is not None:
            config.pluginmanager.register(self.xml, "memotest-junit")

    def _entry(self, nodeid: str) -> dict[str, Any]:
        entry = self.items.get(nodeid)
        if entry is None:
            entry = {"id": nodeid, "outcome": "", "duration": 0.0, "longrepr": []}
            self.items[nodeid] = entry
        return entry

    def _set(self, entry: dict[str, Any], outcome: str, text: str) -> None:
        if _RANK.get(outcome, 1) >= _RANK.get(entry["outcome"], 0):
            entry["outcome"] = outcome
        if text:
            entry["longrepr"].append(text)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self._entry(report.nodeid)
        entry["duration"] += getattr(report, "duration", 0.0) or 0.0
        outcome = _phase_outcome(report)
        if outcome is not None:
            self._set(entry, outcome, "" if report.passed else _text(report))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.passed:
            entry = self._entry(report.nodeid)
            self._set(entry, "error" if report.failed else "skipped", _text(report))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cases = self._junit_cases()
        with open(self.path, "a", encoding="utf-8") as out:
            for nodeid, entry in self.items.items():
                if not entry["outcome"]:
                    continue  # an item that never ran (interrupted)
                line: dict[str, Any] = {
                    "id": nodeid,
                    "outcome": entry["outcome"],
                    "duration": round(entry["duration"], 6),
                }
                if entry["longrepr"]:
                    line["longrepr"] = "\n".join(entry["longrepr"])
                mine = cases.get(nodeid, [])
                if mine:
                    first = ET.fromstring(mine[0])
                    line["classname"] = first.get("classname", "")
                    line["name"] = first.get("name", "")
                    line["junit"] = mine
                out.write(json.dumps(line) + "\n")

    def _junit_cases(self) -> dict[str, list[str]]:
        """Each node id's test case elements, as pytest's JUnit XML would hold them."""
        out: dict[str, list[str]] = {}
        if self.xml is None:
            return out
        ids = self.xml.memotest_ids
        for reporter in getattr(self.xml, "node_reporters_ordered", []):
            nodeid = ids.get(id(reporter))
            try:
                text = ET.tostring(reporter.to_xml(), encoding="unicode")
            except Exception:  # a pytest whose private API changed
                continue
            if nodeid is not None:
                out.setdefault(nodeid, []).append(text)
        return out


def _junit(config: pytest.Config) -> Any:
    """A ``LogXML`` made as ``--junitxml`` makes it, that writes and prints nothing; None
    when this pytest's cannot be made so."""
    try:
        from _pytest.junitxml import LogXML
    except ImportError:
        return None

    class Silent(LogXML):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            #: Each test case reporter's node id (a reporter forgets it when finalized).
            self.memotest_ids: dict[int, str] = {}

        def node_reporter(self, report: Any) -> Any:
            reporter = super().node_reporter(report)
            if id(reporter) not in self.memotest_ids:
                self.memotest_ids[id(reporter)] = str(reporter.id)
            return reporter

        def pytest_sessionfinish(self) -> None:
            """Writes no file: :class:`Recorder` takes the test cases."""

        def pytest_terminal_summary(self) -> None:
            """Prints no "generated xml file" line."""

    try:
        return Silent(
            os.devnull,
            config.option.junitprefix,
            config.getini("junit_suite_name"),
            config.getini("junit_logging"),
            config.getini("junit_duration_report"),
            config.getini("junit_family"),
            config.getini("junit_log_passing_tests"),
        )
    except Exception:  # a pytest whose private API changed
        return None
