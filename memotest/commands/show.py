"""``memotest show``, ``memotest list`` and ``memotest clean``: look into the store."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from memotest.commands.options import add_file_option, add_plugin_options
from memotest.errors import UsageError

if TYPE_CHECKING:
    from memotest.store import Store

# What looking into the store needs is imported by the commands that do (every command's
# parser is built on each start).


def add_parser(sub: argparse._SubParsersAction, plugin_options: bool = True) -> None:
    p = sub.add_parser(
        "show",
        help="show a target's recorded inputs, outputs and log",
        description="Show what the last run of a target recorded.",
    )
    p.add_argument("target", nargs="?", metavar="TARGET")
    p.add_argument("--paths", action="store_true", help="list every input path")
    p.add_argument("--log", action="store_true", help="print the recorded log")
    p.add_argument(
        "--tests",
        action="store_true",
        help="list each test the run reported (a --pytest target): its outcome and duration",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="with --tests, each failure's text too"
    )
    add_file_option(p)
    add_plugin_options(p, plugin_options)
    p.set_defaults(run=show)

    p = sub.add_parser(
        "list",
        help="list the targets and their last result",
        description="List the targets of the targets file.",
    )
    add_file_option(p)
    add_plugin_options(p, plugin_options)
    p.set_defaults(run=list_targets)

    p = sub.add_parser(
        "clean",
        help="delete the store (.memotest/) of the targets file",
        description="Delete every record, log and output stored for the "
        "targets file, so that the next build runs everything. With --gc, keep the "
        "records: evict the least recently used ones while the store is larger than "
        "settings.max_size, and delete what no record refers to any more.",
    )
    p.add_argument(
        "--gc",
        action="store_true",
        help="keep the records: evict the least recently used ones while the store is larger "
        "than settings.max_size, and remove the fingerprints and blobs no record refers to "
        "(builds do this by themselves from time to time)",
    )
    add_file_option(p)
    p.set_defaults(run=clean)


def show(args: argparse.Namespace) -> int:
    from collections import Counter

    from memotest.commands.common import (
        last_used,
        load_or_recorded,
        open_store,
        targets_after_pytest,
    )
    from memotest.load.plugins import Config
    from memotest.loop.build import select

    named = targets_after_pytest(args, [args.target] if args.target else [], "show")
    if len(named) != 1:
        raise UsageError(f"show: name one target, not {len(named)}: {' '.join(named)}")
    args.target = named[0]
    project, recorded = load_or_recorded(Config(args), [args.target])
    if recorded is not None:
        project = recorded.project
        print(recorded.note(), file=sys.stderr)
    assert project is not None
    if recorded is None and args.target not in project.targets:
        hits = [t.name for t in select(project, [args.target])]  # unknown: the usual error
        if len(hits) != 1:
            raise UsageError(f"show: name one target, not a group: {args.target}")
        args.target = hits[0]
    with open_store(project, lock=False) as store:
        rec = last_used(store, [args.target]).get(args.target)
        if rec is None:
            print(f"{args.target}: never run")
            return 0
        if args.log:
            sys.stdout.buffer.write(store.read_blob(rec.log_digest) if rec.log_digest else b"")
            return 0
        if args.tests:
            return show_tests(rec.name, rec.tests_digest, store, verbose=args.verbose)
        n = len(store.variant_heads([rec.name]).get(rec.name, []))
        print(f"{rec.name}: {rec.status} (exit code {rec.exit_code}) in {rec.duration:.2f}s")
        print(f"  recorded runs (variants): {n}; the last to run or replay is shown")
        print(f"  cacheable: {'yes' if rec.cacheable else 'no, ' + str(rec.uncacheable_reason)}")
        kinds = Counter(i.kind.value for i in rec.inputs)
        print(
            f"  inputs: {len(rec.inputs)} ("
            + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            + ")"
        )
        if args.paths:
            for i in sorted(rec.inputs, key=lambda i: (i.path, i.kind.value)):
                print(f"    {i.kind.value:6} {i.path}")
        print(f"  writes: {len(rec.writes)}")
        if args.paths:
            for w in rec.writes:
                print(f"    {w}")
        print(f"  outputs: {', '.join(rec.outputs) or 'none declared'}")
    return 0


def show_tests(name: str, digest: str | None, store: Store, *, verbose: bool) -> int:
    """``show --tests``: each recorded test's outcome and duration, in the order they ran
    (with ``-v``, the failure text of those that did not pass)."""
    from memotest.reporting.textsafe import printable
    from memotest.run import testcases
    from memotest.store import StoreError

    if not digest:
        print(f"{name}: its run reported no tests (only --pytest targets do)")
        return 0
    try:
        tests = testcases.decode(store.read_blob(digest))
    except (ValueError, StoreError, OSError) as exc:
        raise UsageError(f"show: the recorded tests of {name} cannot be read: {exc}") from None
    width = max((len(t.outcome) for t in tests), default=0)
    for t in tests:
        print(f"{t.outcome.upper():{width}} {printable(t.id)} {t.duration:.3f}s")
        if verbose and t.longrepr and t.outcome != "passed":
            for line in t.longrepr.splitlines():
                print(f"    {printable(line)}")
    print(f"{name}: {testcases.describe(tests)}")
    return 0


def list_targets(args: argparse.Namespace) -> int:
    from memotest.commands.common import last_used, load_or_recorded, open_store
    from memotest.load.plugins import Config

    project, recorded = load_or_recorded(Config(args), None)
    if recorded is not None:
        width = max(len(n) for n in recorded.records)
        for name, rec in sorted(recorded.records.items()):
            print(f"{name:{width}}  last {rec.status} in {rec.duration:.1f}s")
        print(recorded.note())
        return 0
    assert project is not None
    with open_store(project, lock=False) as store:
        every = last_used(store, None)
        records = {n: r for n, r in every.items() if n in project.targets}
        # What a tool recorded in this store under names no target has (the nox helper's
        # nox:SESSION:N, the tox plugin's tox:ENV, the make shell's): listed after them.
        others = {n: r for n, r in every.items() if n not in project.targets}
    width = max((len(n) for n in project.targets), default=0)
    default = None if project.default is None else set(project.default)
    for name, t in project.targets.items():
        rec = records.get(name)
        last = "never run" if rec is None else f"last {rec.status} in {rec.duration:.1f}s"
        tags = f" [{', '.join(sorted(t.tags))}]" if t.tags else ""
        # A target a build without names leaves out (nox's default=False, a manual rule).
        mark = " (not default: name it)" if default is not None and name not in default else ""
        print(f"{name:<{width}}  {last}{tags}{mark}")
    if others:
        print("other records in this store (made by a tool, or by targets no longer defined):")
        width = max(len(n) for n in others)
        for name, rec in sorted(others.items()):
            print(f"  {name:{width}}  last {rec.status} in {rec.duration:.1f}s")
    return 0


def clean(args: argparse.Namespace) -> int:
    """Deletes the store, whatever is there, reading nothing in it (so it works on a
    damaged one); with ``--gc``, opens it (setting a damaged part aside) and collects."""
    from memotest.commands.common import open_store, wipe_store
    from memotest.load.config import load_project
    from memotest.load.plugins import Config

    project = load_project(Config(args))
    if not args.gc:
        wipe_store(project)
        print(f"removed the store of {project.path}")
        return 0
    with open_store(project, lock=True) as store:
        before = store.size_bytes()
        stats = store.gc(project.settings.max_size)
        print(
            f"evicted {stats.variants} least recently used records; "
            f"removed {stats.fingerprints} unused fingerprints, {stats.paths} paths and "
            f"{stats.blobs} blobs; the store went from {before / 1e6:.1f} MB to "
            f"{store.size_bytes() / 1e6:.1f} MB"
        )
    return 0
