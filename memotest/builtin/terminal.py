"""Built-in plugin: the terminal reporter (status lines, failed logs, the summary)."""

from __future__ import annotations

from memotest.hookspecs import hookimpl
from memotest.model import Target
from memotest.plugins import Config
from memotest.report import Summary, TargetResult, TerminalReporter

_reporter: TerminalReporter | None = None


@hookimpl
def memotest_build_start(targets: list[Target], config: Config) -> None:
    global _reporter
    _reporter = TerminalReporter(verbose=bool(getattr(config.options, "verbose", False)))
    _reporter.start(len(targets))


@hookimpl
def memotest_target_running(names: list[str]) -> None:
    if _reporter is not None:
        _reporter.running(names)


@hookimpl
def memotest_after_target(target: Target, result: TargetResult) -> None:
    if _reporter is not None:
        _reporter.result(result)


@hookimpl(trylast=True)
def memotest_report(summary: Summary, config: Config) -> None:
    if _reporter is not None:
        _reporter.finish(summary)
