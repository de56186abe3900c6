"""``memotest build [TARGET...]``: run the targets, skipping what is up to date."""

from __future__ import annotations

import argparse
import os

from memotest import plugins
from memotest.build import Build, Options, interrupt_on_sigterm, select
from memotest.commands.common import add_file_option, load_project, open_store
from memotest.errors import UsageError
from memotest.store import Store
from memotest.tracer.warm.pool import close_shared_pool, shared_pool


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="run the targets, replaying the results of those whose inputs did not change",
        description="Run the targets (all, or those named: a name, a foreach group, or a "
        "glob). A target whose recorded observations all still hold is not run: its last "
        "result is replayed. Exit status: 0 all passed or cached, 1 a target failed, "
        "2 usage or configuration error, 130 interrupted.",
    )
    p.add_argument("targets", nargs="*", metavar="TARGET", help="targets to build")
    add_file_option(p)
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help="run up to N targets at once (default: settings.jobs, else the CPU count)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="run every selected target even if cached (and record the results)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="run every selected target and neither read nor write the store",
    )
    p.add_argument(
        "-n", "--dry-run", action="store_true", help="say what would run and why; run nothing"
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="say why each target ran, why a result was not cached, and why a warm worker "
        "was not used or was replaced",
    )
    p.add_argument(
        "--audit",
        type=_fraction,
        default=0.0,
        metavar="FRACTION",
        help="also re-run this fraction (0-1) of the targets that would be cached, chosen "
        "at random, and fail if a result differs from the cached one",
    )
    p.add_argument("--audit-seed", type=int, metavar="N", help="the seed of --audit's choice")
    p.add_argument(
        "--no-warm",
        action="store_true",
        help="start every target as a fresh process, never forked from a warm worker "
        "(pytest targets are, by default)",
    )
    p.add_argument(
        "--no-preload",
        action="store_true",
        help="warm workers import pytest only, not also the libraries earlier runs imported",
    )
    p.add_argument(
        "--whole-files",
        action="store_true",
        help="fingerprint every Python file whole, every listed folder by all its entries, "
        "pyproject.toml, entry_points.txt and *.gz files whole: not by the code, the entries, "
        "the table, the entry points and the gzip data a forked pytest run used",
    )
    plugins.call("memotest_addoption", parser=p)
    p.set_defaults(run=run)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def run(args: argparse.Namespace) -> int:
    shared_pool().preload = not args.no_preload
    shared_pool().code_level = not args.whole_files
    config = plugins.Config(args, plugins.manager())
    plugins.call("memotest_configure", config=config)
    project = load_project(args)
    targets = select(project, args.targets)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("build: -j must be at least 1")
    jobs = args.jobs or project.settings.jobs or os.cpu_count() or 1
    options = Options(
        jobs=jobs,
        force=args.force,
        dry_run=args.dry_run,
        no_cache=args.no_cache,
        verbose=args.verbose,
        audit=args.audit,
        audit_seed=args.audit_seed,
        warm=not args.no_warm,
    )
    store = None if args.no_cache else open_store(project, lock=not args.dry_run)
    undo = interrupt_on_sigterm()
    try:
        summary = Build(project, store, options, config).run(targets)
    except KeyboardInterrupt:
        print("memotest: interrupted; running targets were stopped", flush=True)
        return 130
    finally:
        undo()
        if args.verbose:
            for event, times in shared_pool().events.items():
                print(f"memotest: {event}" + (f" ({times} times)" if times > 1 else ""))
        close_shared_pool()  # the warm workers (also stopped at exit, e.g. after an error)
        if store is not None:
            try:
                if not args.dry_run:
                    collect_garbage(store, verbose=args.verbose)
            finally:
                store.close()
    plugins.call("memotest_report", summary=summary, config=config)
    if args.dry_run:
        return 0
    return 0 if summary.ok else 1


def collect_garbage(store: Store, *, verbose: bool) -> None:
    """The store's periodic clean-up (:meth:`Store.gc_if_due`); says what it removed with -v."""
    stats = store.gc_if_due()
    if stats is not None and verbose:
        print(
            f"memotest: store: removed {stats.fingerprints} unused fingerprints and "
            f"{stats.blobs} blobs ({stats.bytes / 1e6:.1f} MB)"
        )
