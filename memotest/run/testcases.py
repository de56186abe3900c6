"""Per-test results: the outcome of each test a target ran, recorded and replayed with it.

A target is one command; a test runner inside it (pytest, through the pytest plugin's
``memotest_pytest.narrow``) may tell memotest the outcome of each test it ran. The runner
names a file for that in every run's environment (:data:`RESULTS_ENV`), inside the run's
own folder: like that folder (its TMPDIR, its log), the file is never an input nor an
output of the target, nor part of its key, and each run has its own, so that targets
running side by side never share one. The test runner appends one JSON object per line,
each :meth:`TestOutcome.as_json`; :func:`read_results` reads them back after the run.

The list is stored with the record as one CAS blob (:func:`encode`/:func:`decode`), named
by the record's ``tests_digest`` (``store/records.py``: kept from the GC as its log is),
and given back by a replay with every entry ``cached``. Another reader (test-level
selection) reads a record's list with ``Store.read_blob(record.tests_digest)`` and
:func:`decode`, and writes a merged list with :func:`encode` and ``Store.put_blob``.

A target whose run wrote no such file has no per-test results (None): the reports keep
one case for the whole target.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

#: The variable naming the file a run writes its per-test results to (one per run).
RESULTS_ENV = "MEMOTEST_TEST_RESULTS"

#: The outcomes a test can have (pytest's words: an ``error`` is a failure outside the
#: test's call, in its setup, teardown or its file's collection).
OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")

#: The outcomes that fail a run.
FAILING = ("failed", "error")

#: The version of the stored blob's layout (:func:`encode`).
FORMAT = 1


@dataclass(frozen=True)
class TestOutcome:
    """The outcome of one test item of a run.

    ``id`` is the test runner's id (pytest's node id, ``tests/test_a.py::TestX::test_y[1]``;
    a file that failed to collect is its file's id). ``longrepr`` is the failure's text
    (pytest's ``longrepr`` as text; for a skip, where and why), empty when it passed.
    ``classname``/``name`` are the JUnit names the test runner's own JUnit XML gives it;
    ``junit`` the ``<testcase>`` elements it writes for it, as XML text, exactly (usually
    one; pytest writes two for a test whose call failed and whose teardown failed too), or
    empty when the runner could not say. ``cached`` is set on a replay, never stored.
    """

    __test__ = False  # not a pytest test class, whatever its name

    id: str
    outcome: str
    duration: float = 0.0
    longrepr: str = ""
    classname: str = ""
    name: str = ""
    junit: tuple[str, ...] = field(default=())
    cached: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"test outcome must be one of {OUTCOMES}, not {self.outcome!r}")

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    def as_json(self) -> dict[str, Any]:
        """The stored form (``cached`` is not stored: a replay sets it)."""
        out: dict[str, Any] = {
            "id": self.id,
            "outcome": self.outcome,
            "duration": round(float(self.duration), 6),
        }
        for key in ("longrepr", "classname", "name"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.junit:
            out["junit"] = list(self.junit)
        return out

    @classmethod
    def from_json(cls, data: Any) -> TestOutcome:
        """The outcome of :meth:`as_json`'s form; ValueError/TypeError if it is not one."""
        if not isinstance(data, dict):
            raise TypeError("a test outcome is an object")
        junit = data.get("junit", [])
        if not isinstance(junit, list) or not all(isinstance(j, str) for j in junit):
            raise TypeError("junit must be a list of strings")
        texts = {k: data.get(k, "") for k in ("id", "outcome", "longrepr", "classname", "name")}
        if not all(isinstance(v, str) for v in texts.values()):
            raise TypeError("id, outcome, longrepr, classname and name are strings")
        duration = data.get("duration", 0.0)
        if not isinstance(duration, (int, float)) or isinstance(duration, bool):
            raise TypeError("duration is a number")
        return cls(duration=float(duration), junit=tuple(junit), **texts)

    def as_cached(self) -> TestOutcome:
        return replace(self, cached=True)


def encode(tests: Iterable[TestOutcome]) -> bytes:
    """The stored blob of a list of outcomes (zlib-compressed JSON, in the run's order)."""
    doc = {"format": FORMAT, "tests": [t.as_json() for t in tests]}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)


def decode(blob: bytes) -> list[TestOutcome]:
    """The outcomes of an :func:`encode` blob; ValueError if it is not one."""
    try:
        doc = json.loads(zlib.decompress(blob))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a list of test outcomes of format {FORMAT}")
        return [TestOutcome.from_json(t) for t in doc["tests"]]
    except (zlib.error, KeyError, TypeError, UnicodeError) as exc:
        raise ValueError(f"not a list of test outcomes: {exc}") from None


def read_results(path: str) -> list[TestOutcome] | None:
    """The outcomes a run wrote to ``path`` (JSON lines), None when it wrote none. A line
    that does not parse (a run killed while writing it) is left out."""
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    out: list[TestOutcome] = []
    for line in lines:
        try:
            out.append(TestOutcome.from_json(json.loads(line)))
        except (ValueError, TypeError, UnicodeError):
            continue
    return out


def counts(tests: Iterable[TestOutcome]) -> dict[str, int]:
    """How many tests had each outcome, in :data:`OUTCOMES` order, those with none left out."""
    n = dict.fromkeys(OUTCOMES, 0)
    for t in tests:
        n[t.outcome] += 1
    return {k: v for k, v in n.items() if v}


def describe(tests: list[TestOutcome]) -> str:
    """``412 tests: 410 passed, 2 skipped`` (for the summary and ``show --tests``)."""
    counted = ", ".join(f"{n} {k}" for k, n in counts(tests).items())
    noun = "test" if len(tests) == 1 else "tests"
    return f"{len(tests)} {noun}: {counted or 'none'}"
