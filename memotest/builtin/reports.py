"""Built-in plugin: ``--json-report FILE`` and ``--junit-xml FILE``."""

from __future__ import annotations

import argparse
import contextlib
import os

from memotest.errors import UsageError
from memotest.hookspecs import hookimpl
from memotest.load.plugins import Config
from memotest.reporting.report import Summary, write_json, write_junit


@hookimpl
def memotest_addoption(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json-report", metavar="FILE", help="write a JSON report to FILE")
    parser.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report to FILE")


@hookimpl
def memotest_configure(config: Config) -> None:
    for opt in ("json_report", "junit_xml"):
        path = getattr(config.options, opt, None)
        if path:
            check_writable(path, "--" + opt.replace("_", "-"))


def check_writable(path: str, option: str) -> None:
    """Raises a :class:`UsageError` unless a report can be written at ``path``: found
    before any target runs, not after (its folder exists, it is not a folder, and a file
    can be opened there for writing: tried, and a file the try created is removed)."""
    if "\0" in path:
        raise UsageError(f"{option}: {path!r} is not a path")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option}: cannot write {path}: no such folder {folder}")
    if os.path.isdir(path):
        raise UsageError(f"{option}: cannot write {path}: it is a folder (name a file in it)")
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(
            f"{option}: cannot write {path}: {exc.strerror or exc} (name a writable file)"
        ) from None
    if not existed:
        with contextlib.suppress(OSError):
            os.unlink(path)


@hookimpl
def memotest_report(summary: Summary, config: Config) -> None:
    for opt, write in (("json_report", write_json), ("junit_xml", write_junit)):
        path = getattr(config.options, opt, None)
        if path:
            try:
                write(summary, path)
            except OSError as exc:  # checked before the build; changed since
                raise UsageError(f"cannot write the report {path}: {exc.strerror or exc}") from None
