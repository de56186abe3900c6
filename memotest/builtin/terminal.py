"""Built-in plugin: the terminal reporter (status lines, failed logs, the summary).

Status lines follow ninja and Bazel: one line per finished target, ``[3/12] PASSED name
1.2s``, cached ones as ``(cached) PASSED``, the log of every failed target, and a summary
with the time cached targets saved. On a terminal a transient line shows what is running.

The reporter is an object registered as a plugin (named ``terminalreporter``) by
``memotest_configure`` and unregistered by ``memotest_unconfigure``: each configured
command has its own, and a plugin may replace it
(``config.pluginmanager.get_plugin("terminalreporter")``).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, TextIO

from memotest.hookspecs import hookimpl
from memotest.load.plugins import Config
from memotest.model import Target
from memotest.reporting.report import STATUSES, Summary, TargetResult
from memotest.run.testcases import describe

if TYPE_CHECKING:
    from memotest.loop.shard import ShardPlan

NAME = "terminalreporter"


@hookimpl
def memotest_configure(config: Config) -> None:
    config.pluginmanager.register(TerminalReporter(config), NAME)


@hookimpl
def memotest_unconfigure(config: Config) -> None:
    reporter = config.pluginmanager.get_plugin(NAME)
    if reporter is not None:
        config.pluginmanager.unregister(reporter)


#: The longest note shown without ``-v``.
TERSE = 120


def terse(note: str) -> str:
    """The first reason of a note (``not cached: A; B (+2 more)``), its paths under the
    current folder made relative, at most :data:`TERSE` characters, pointing to ``-v``
    when it left something out."""
    first = note.split("; ", 1)[0].replace(os.path.join(os.getcwd(), ""), "")
    if len(first) > TERSE:
        first = first[: TERSE - 3] + "..."
    return first if "; " not in note and len(note) <= TERSE else f"{first} (-v for more)"


def _fmt_time(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


class TerminalReporter:
    """Writes status lines to ``out`` (stdout by default)."""

    def __init__(self, config: Config, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.verbose = bool(getattr(config.options, "verbose", False))
        self.tty = self.out.isatty() and os.environ.get("TERM") != "dumb"
        self.total = 0
        self.done = 0
        #: The build's targets: what else runs meanwhile (a loader's memoized
        #: collection, before the build starts) is not one of its status lines.
        self.names: frozenset[str] = frozenset()
        self._transient = False

    def _clear(self) -> None:
        if self._transient:
            self.out.write("\r\x1b[K")
            self._transient = False

    @hookimpl
    def memotest_build_start(self, targets: list[Target]) -> None:
        self.total = len(targets)
        self.done = 0
        self.names = frozenset(t.name for t in targets)

    @hookimpl
    def memotest_target_running(self, names: list[str]) -> None:
        """The targets now running (shown on a terminal only)."""
        names = [n for n in names if n in self.names]
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

    @hookimpl
    def memotest_after_target(self, result: TargetResult) -> None:
        r = result
        if r.name not in self.names:
            return
        if r.replaces:
            self.total += 1  # one more step learned of (as ninja grows its total)
        self.done += 1
        self._clear()
        label = {"cached": "(cached) PASSED"}.get(r.status, r.status.upper())
        if r.flaky:
            label += " (flaky)"
        line = f"[{self.done}/{self.total}] {label} {r.name}"
        if r.selected is not None:
            line += f" ({r.selected[0]} of {r.selected[1]} tests run)"
        if r.status != "skipped":
            line += f" {_fmt_time(r.duration)}"
        shown = (
            r.status in ("skipped", "error")
            or r.replaces  # why the target has a second line
            or (self.verbose and r.status != "cached")
        )
        if r.reason and shown:
            line += f" ({r.reason})"
        self.out.write(line + "\n")
        if r.whole and self.verbose:
            self.out.write(f"  Python files kept whole: {r.whole}\n")
        if r.note:  # why it will run again: terse as ninja's, the detail with -v
            self.out.write(f"  {r.note if self.verbose or r.fault else terse(r.note)}\n")
        if r.status in ("failed", "timeout", "error") and r.log:
            text = r.log.decode("utf-8", "replace")
            self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    @hookimpl(trylast=True)
    def memotest_report(self, summary: Summary) -> None:
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
                f"hazard: {e.after} {e.how(e.after)} {e.before} and they conflict on {e.path}; "
                "both ran again alone, and from now on they run in that order\n"
            )
        if summary.shard is not None:
            self.out.write(_shard_line(summary.shard) + "\n")
        parts = [f"{summary.count(s)} {s}" for s in STATUSES if summary.count(s)]
        line = f"{len(summary.results)} targets: {', '.join(parts) or 'nothing to do'}"
        line += f" in {_fmt_time(summary.duration)}"
        if summary.saved:
            line += f" (cache saved {_fmt_time(summary.saved)})"
        if summary.first_failure is not None:
            line += f"; first failure after {_fmt_time(summary.first_failure)}"
        tests = summary.tests()
        if tests is not None:
            line += f"; {describe(tests)}"
        self.out.write(line + "\n")
        if summary.remote:
            from memotest.remote import summary_line

            self.out.write(summary_line(summary.remote) + "\n")
        self.out.flush()


def _shard_line(plan: ShardPlan) -> str:
    """``shard 2/4: 13 of 50 targets (about 41s of 2m40s), and 1 they need: build-ext``."""
    line = (
        f"shard {plan.shard}: {len(plan.assigned)} of {plan.selected} targets "
        f"(about {_fmt_time(plan.estimate)} of {_fmt_time(plan.total)})"
    )
    if plan.needed:
        shown = ", ".join(plan.needed[:3]) + (" ..." if len(plan.needed) > 3 else "")
        line += f", and {len(plan.needed)} they need from other shards: {shown}"
    return line
