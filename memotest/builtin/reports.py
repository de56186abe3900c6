"""Built-in plugin: ``--json-report FILE`` and ``--junit-xml FILE``."""

from __future__ import annotations

import argparse
import os

from memotest.errors import UsageError
from memotest.hookspecs import hookimpl
from memotest.plugins import Config
from memotest.report import Summary, write_json, write_junit


@hookimpl
def memotest_addoption(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json-report", metavar="FILE", help="write a JSON report to FILE")
    parser.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report to FILE")


@hookimpl
def memotest_configure(config: Config) -> None:
    for opt in ("json_report", "junit_xml"):
        path = getattr(config.options, opt, None)
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UsageError(f"cannot write {path}: no such folder")


@hookimpl
def memotest_report(summary: Summary, config: Config) -> None:
    if getattr(config.options, "json_report", None):
        write_json(summary, config.options.json_report)
    if getattr(config.options, "junit_xml", None):
        write_junit(summary, config.options.junit_xml)
