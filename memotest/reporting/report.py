"""The results of a build (:class:`TargetResult`, :class:`Summary`) and the files that
report them: the JSON report and JUnit XML. The terminal's status lines are the built-in
plugin :mod:`memotest.builtin.terminal`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memotest.reporting.textsafe import printable
from memotest.run.testcases import TestOutcome

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from memotest.loop.shard import ShardPlan

# xml.etree is imported by the JUnit writer, which few builds use (every build imports this).

STATUSES = ("passed", "failed", "cached", "timeout", "error", "skipped")


@dataclass
class TargetResult:
    """The result of one target in one build (``cached`` means replayed from the store)."""

    name: str
    status: str
    duration: float
    exit_code: int | None = None
    reason: str | None = None
    log: bytes = b""
    flaky: bool = False
    note: str | None = None  #: e.g. why a passing result was not cached
    #: memotest itself failed after the command ran (:mod:`memotest.drive.faults`): ``note``
    #: says how, and is shown without ``-v``.
    fault: bool = False
    #: This result replaces the one reported before for the same target in this build (a
    #: replay run again once a run wrote what it read): the summary and the reports hold
    #: the target once, with this result; a plugin counting results should too.
    replaces: bool = False
    #: The outcome of each test the target ran (``memotest/run/testcases.py``; ``cached`` on
    #: a replay), None when it reported none.
    tests: list[TestOutcome] | None = None
    #: ``--select tests``: how many of its tests the run ran, of how many (the others'
    #: outcomes replayed: :mod:`memotest.check.select`), or None when it ran them all.
    selected: tuple[int, int] | None = None
    #: Why the run kept its Python files whole where it could have noted them by the
    #: code that ran (``Trace.code_whole``; shown with ``build -v``), else None.
    whole: str | None = None


@dataclass
class Summary:
    results: list[TargetResult] = field(default_factory=list)
    duration: float = 0.0
    first_failure: float | None = None  # seconds from start to the first failed result
    hazards: list = field(default_factory=list)  # schedule.Edge: conflicts seen in parallel
    audit: dict = field(default_factory=dict)  # --audit: seed, audited names, errors
    remote: dict = field(default_factory=dict)  # the remote cache's counts (remote/cache.py)
    shard: ShardPlan | None = None  # --shard: what this shard was given

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    def tests(self) -> list[TestOutcome] | None:
        """The tests of the targets that reported theirs, None when none did."""
        lists = [r.tests for r in self.results if r.tests is not None]
        return [t for tests in lists for t in tests] if lists else None

    @property
    def saved(self) -> float:
        return sum(r.duration for r in self.results if r.status == "cached")

    @property
    def ok(self) -> bool:
        """Whether the build succeeded: no failure, and no audit error. A skipped target
        is not a failure (a command that said it skipped, or one whose need did not pass,
        which that need's own failure already counts)."""
        if self.audit.get("errors"):
            return False
        return all(r.status in ("passed", "cached", "skipped") for r in self.results)

    def as_json(self) -> dict[str, object]:
        return {
            "summary": {
                "total": len(self.results),
                "passed": self.count("passed"),
                "failed": self.count("failed"),
                "cached": self.count("cached"),
                "timeout": self.count("timeout"),
                "error": self.count("error"),
                "skipped": self.count("skipped"),
                "duration": round(self.duration, 3),
                "saved": round(self.saved, 3),
                "first_failure": (
                    round(self.first_failure, 3) if self.first_failure is not None else None
                ),
            },
            "audit": self.audit or None,
            "remote": self.remote or None,
            "shard": self.shard.as_json() if self.shard else None,
            "hazards": [
                {"before": e.before, "after": e.after, "path": e.path, "overlapped": e.overlapped}
                for e in self.hazards
            ],
            "targets": [_target_json(r) for r in self.results],
        }


def _target_json(r: TargetResult) -> dict[str, object]:
    """One target of the JSON report; with ``tests`` when it reported its tests."""
    out: dict[str, object] = {
        "name": r.name,
        "status": r.status,
        "duration": round(r.duration, 3),
        "exit_code": r.exit_code,
        "reason": r.reason,
        "note": r.note,
    }
    if r.whole is not None:
        out["whole"] = r.whole
    if r.tests is not None:
        out["tests"] = [
            {
                "id": t.id,
                "status": t.outcome,
                "duration": round(t.duration, 3),
                "cached": t.cached,
            }
            for t in r.tests
        ]
    return out


def write_json(summary: Summary, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary.as_json(), f, indent=2)
        f.write("\n")


def write_junit(summary: Summary, path: str) -> None:
    """JUnit XML as Jenkins, GitLab and GitHub test reporters read it.

    A target that reported its tests (``memotest/run/testcases.py``: a ``--pytest`` target)
    is one test case per test, as its test runner's own JUnit XML writes them (pytest's
    names, failures, errors and skips), each with a property ``memotest.cached``
    (``true`` when replayed). Any other target is one test case: cached ones pass with a
    ``cached`` property, skipped ones are ``<skipped/>``."""
    import xml.etree.ElementTree as ET

    cases: list[ET.Element] = []
    for r in summary.results:
        cases.extend(_test_cases(r))
        # A target that failed with no failing test (a crash, a session-level failure)
        # keeps its own case: the failure must show.
        if r.tests is None or (
            r.status not in ("passed", "cached") and not any(t.failing for t in r.tests)
        ):
            cases.append(_target_case(r))
    suite = ET.Element(
        "testsuite",
        name="memotest",
        tests=str(len(cases)),
        failures=str(sum(1 for c in cases if c.find("failure") is not None)),
        errors=str(sum(1 for c in cases if c.find("error") is not None)),
        skipped=str(sum(1 for c in cases if c.find("skipped") is not None)),
        time=f"{summary.duration:.3f}",
    )
    suite.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _target_case(r: TargetResult) -> ET.Element:
    """The one test case of a target that did not report its tests."""
    import xml.etree.ElementTree as ET

    case = ET.Element("testcase", classname="memotest", name=printable(r.name))
    case.set("time", f"{r.duration:.3f}")
    log = _xml_text(r.log.decode("utf-8", "replace"))
    if r.status == "failed":
        ET.SubElement(case, "failure", message=f"exit code {r.exit_code}").text = log
    elif r.status in ("timeout", "error"):
        ET.SubElement(case, "error", message=_xml_text(printable(r.reason or r.status))).text = log
    elif r.status == "skipped":
        ET.SubElement(case, "skipped", message=_xml_text(printable(r.reason or "skipped")))
    elif r.status == "cached":
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="cached", value="true")
    return case


def _test_cases(r: TargetResult) -> list[ET.Element]:
    """The test cases of a target's tests, each marked ``memotest.cached``."""
    import xml.etree.ElementTree as ET

    out: list[ET.Element] = []
    for t in r.tests or ():
        elements = []
        for text in t.junit:
            try:
                elements.append(ET.fromstring(text))
            except ET.ParseError:
                elements = []
                break
        if not elements:  # the test runner could not say: named from its id
            elements = [_plain_case(t)]
        for case in elements:
            props = case.find("properties")
            if props is None:
                props = ET.Element("properties")
                case.insert(0, props)
            value = "true" if t.cached else "false"
            ET.SubElement(props, "property", name="memotest.cached", value=value)
            out.append(case)
    return out


def _plain_case(t: TestOutcome) -> ET.Element:
    """A test case made from an outcome without the runner's own JUnit element."""
    import xml.etree.ElementTree as ET

    file, _, rest = t.id.partition("::")
    parts = rest.split("::") if rest else []
    dotted = file.replace("/", ".").removesuffix(".py")
    classname = t.classname or ".".join([dotted, *parts[:-1]])
    name = t.name or (parts[-1] if parts else dotted.rsplit(".", 1)[-1])
    case = ET.Element("testcase", classname=_xml_text(classname), name=_xml_text(name))
    case.set("time", f"{t.duration:.3f}")
    text = _xml_text(t.longrepr)
    if t.outcome == "failed":
        ET.SubElement(case, "failure", message=text.splitlines()[-1] if text else "").text = text
    elif t.outcome == "error":
        ET.SubElement(case, "error", message="error").text = text
    elif t.outcome in ("skipped", "xfailed"):
        ET.SubElement(case, "skipped", message=text.splitlines()[-1] if text else "")
    return case


def _xml_text(s: str) -> str:
    # XML 1.0 cannot carry most control characters; drop them from logs. A name that is
    # not UTF-8 (a file name's undecodable bytes, as surrogates) cannot be encoded: "?".
    s = s.encode("utf-8", "replace").decode("utf-8")
    return "".join(c for c in s if c in "\t\n\r" or ord(c) >= 0x20)
