"""Reports of a build: the terminal status lines, the JSON report and JUnit XML.

Status lines follow ninja and Bazel: one line per finished target, ``[3/12] PASSED name
1.2s``, cached ones as ``(cached) PASSED``, the log of every failed target, and a summary
with the time cached targets saved. On a terminal a transient line shows what is running.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TextIO

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


@dataclass
class Summary:
    results: list[TargetResult] = field(default_factory=list)
    duration: float = 0.0
    first_failure: float | None = None  # seconds from start to the first failed result
    hazards: list = field(default_factory=list)  # schedule.Edge: conflicts seen in parallel
    audit: dict = field(default_factory=dict)  # --audit: seed, audited names, errors

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def saved(self) -> float:
        return sum(r.duration for r in self.results if r.status == "cached")

    @property
    def ok(self) -> bool:
        if self.audit.get("errors"):
            return False
        return all(r.status in ("passed", "cached") for r in self.results)

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
            "hazards": [
                {"before": e.before, "after": e.after, "path": e.path} for e in self.hazards
            ],
            "targets": [
                {
                    "name": r.name,
                    "status": r.status,
                    "duration": round(r.duration, 3),
                    "exit_code": r.exit_code,
                    "reason": r.reason,
                }
                for r in self.results
            ],
        }


def _fmt_time(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


class TerminalReporter:
    """Writes status lines to ``out`` (stdout by default)."""

    def __init__(self, out: TextIO | None = None, *, verbose: bool = False) -> None:
        self.out = out or sys.stdout
        self.verbose = verbose
        self.tty = self.out.isatty() and os.environ.get("TERM") != "dumb"
        self.total = 0
        self.done = 0
        self._transient = False
        self._started = time.monotonic()

    def _clear(self) -> None:
        if self._transient:
            self.out.write("\r\x1b[K")
            self._transient = False

    def start(self, total: int) -> None:
        self.total = total
        self._started = time.monotonic()

    def running(self, names: list[str]) -> None:
        """The targets now running (shown on a terminal only)."""
        if not self.tty or not names:
            return
        self._clear()
        width = shutil.get_terminal_size((100, 24)).columns - 20
        shown = ", ".join(names)
        if len(shown) > width:
            shown = shown[: max(width - 3, 10)] + "..."
        self.out.write(f"[{self.done}/{self.total}] running {shown}")
        self.out.flush()
        self._transient = True

    def result(self, r: TargetResult) -> None:
        self.done += 1
        self._clear()
        label = {"cached": "(cached) PASSED"}.get(r.status, r.status.upper())
        if r.flaky:
            label += " (flaky)"
        line = f"[{self.done}/{self.total}] {label} {r.name}"
        if r.status != "skipped":
            line += f" {_fmt_time(r.duration)}"
        shown = r.status in ("skipped", "error") or (self.verbose and r.status != "cached")
        if r.reason and shown:
            line += f" ({r.reason})"
        self.out.write(line + "\n")
        if self.verbose and r.note:
            self.out.write(f"  {r.note}\n")
        if r.status in ("failed", "timeout", "error") and r.log:
            text = r.log.decode("utf-8", "replace")
            self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    def finish(self, summary: Summary) -> None:
        self._clear()
        if summary.audit:
            a = summary.audit
            self.out.write(
                f"audit: re-ran {len(a['audited'])} cached target(s) (seed {a['seed']}): "
                + (f"{len(a['errors'])} memoization error(s)" if a["errors"] else "all agreed")
                + "\n"
            )
            for err in a["errors"]:
                self.out.write(f"memoization error: {err}\n")
        for e in summary.hazards:
            self.out.write(
                f"hazard: {e.after} ran alongside {e.before} and they conflict on {e.path}; "
                "both ran again alone, and from now on they run in that order\n"
            )
        parts = [f"{summary.count(s)} {s}" for s in STATUSES if summary.count(s)]
        line = f"{len(summary.results)} targets: {', '.join(parts) or 'nothing to do'}"
        line += f" in {_fmt_time(summary.duration)}"
        if summary.saved:
            line += f" (cache saved {_fmt_time(summary.saved)})"
        if summary.first_failure is not None:
            line += f"; first failure after {_fmt_time(summary.first_failure)}"
        self.out.write(line + "\n")
        self.out.flush()


def write_json(summary: Summary, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary.as_json(), f, indent=2)
        f.write("\n")


def write_junit(summary: Summary, path: str) -> None:
    """JUnit XML as Jenkins, GitLab and GitHub test reporters read it. Cached targets are
    passing test cases with a ``cached`` property; skipped ones are ``<skipped/>``."""
    suite = ET.Element(
        "testsuite",
        name="memotest",
        tests=str(len(summary.results)),
        failures=str(summary.count("failed")),
        errors=str(summary.count("timeout") + summary.count("error")),
        skipped=str(summary.count("skipped")),
        time=f"{summary.duration:.3f}",
    )
    for r in summary.results:
        case = ET.SubElement(
            suite, "testcase", classname="memotest", name=r.name, time=f"{r.duration:.3f}"
        )
        log = _xml_text(r.log.decode("utf-8", "replace"))
        if r.status == "failed":
            ET.SubElement(case, "failure", message=f"exit code {r.exit_code}").text = log
        elif r.status in ("timeout", "error"):
            ET.SubElement(case, "error", message=r.reason or r.status).text = log
        elif r.status == "skipped":
            ET.SubElement(case, "skipped", message=r.reason or "skipped")
        elif r.status == "cached":
            props = ET.SubElement(case, "properties")
            ET.SubElement(props, "property", name="cached", value="true")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _xml_text(s: str) -> str:
    # XML 1.0 cannot carry most control characters; drop them from logs.
    return "".join(c for c in s if c in "\t\n\r" or ord(c) >= 0x20)
