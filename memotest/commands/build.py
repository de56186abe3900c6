"""``memotest build [TARGET...]``: run the targets, skipping what is up to date."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from memotest.commands.options import add_file_option, add_plugin_options
from memotest.errors import UsageError

if TYPE_CHECKING:
    from memotest.load import plugins
    from memotest.load.config import Project
    from memotest.model import Target
    from memotest.remote import RemoteCache
    from memotest.store import Store
    from memotest.tracer.warm.pool import WorkerPool

# The command line is parsed before anything is built: what only building needs is
# imported by the functions that build (a --help or --version costs none of it).


def add_parser(sub: argparse._SubParsersAction, plugin_options: bool = True) -> None:
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
        "--shard",
        metavar="I/N",
        help="run shard I of N: a deterministic share of the selected targets, balanced by "
        "their recorded durations, and what those need (for N parallel CI jobs)",
    )
    p.add_argument(
        "--no-warm",
        action="store_true",
        help="start every target as a fresh process, never forked from a warm worker "
        "(the targets that declare warm modules are, by default)",
    )
    p.add_argument(
        "--no-preload",
        action="store_true",
        help="warm workers import the modules their targets declare only, not also the "
        "libraries earlier runs imported",
    )
    p.add_argument(
        "--select",
        choices=("tests", "files"),
        default=None,
        help="tests: a stale test file runs only the tests whose result could have changed "
        "and replays the others' outcomes (memotest/check/select.py); files: whole (the default, "
        "or settings.select)",
    )
    p.add_argument(
        "--whole-files",
        action="store_true",
        help="fingerprint every Python file whole, every listed folder by all its entries, "
        "and every file a reader takes a part of whole: not by the code, the entries and the "
        "parts a run forked from a warm worker used",
    )
    p.add_argument(
        "--remote",
        metavar="URL",
        help="a remote cache shared with other machines: http(s)://HOST/PREFIX (bazel-remote, "
        "nginx WebDAV, ccache's http storage) or redis://HOST:PORT (wins over "
        "MEMOTEST_REMOTE and the remote setting)",
    )
    p.add_argument("--no-remote", action="store_true", help="use no remote cache, whatever is set")
    p.add_argument(
        "--remote-read-only",
        action="store_true",
        help="take results from the remote cache but upload none (MEMOTEST_REMOTE_READ_ONLY=1)",
    )
    add_plugin_options(p, plugin_options)
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
    from memotest.load import plugins

    with plugins.configured(args) as config:
        return build(config)


def build(config: plugins.Config) -> int:
    from memotest.load.config import load_project

    args = config.options
    # Created before the targets are loaded: a loader's memoized collection forks from it.
    pool = config.worker_pool = None if args.no_warm else warm_pool(config)
    config.building = True  # Build.run finishes what the loader deferred
    try:
        project = load_project(config)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    return _build(config, project)


def _build(config: plugins.Config, project: Project) -> int:
    from memotest.commands.common import open_store
    from memotest.load import plugins
    from memotest.loop.build import Build, Options, interrupt_on_sigterm, select
    from memotest.remote import open_remote

    args = config.options
    pool = config.worker_pool
    targets = select(project, args.targets)
    shard = None
    if args.shard:
        from memotest.loop.shard import parse_shard, plan_shards

        shard = parse_shard(args.shard)
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
    )
    try:
        remote = open_remote(args, project.settings, os.environ)
    except UsageError:
        if pool is not None:
            pool.close()
        raise
    store = None if args.no_cache else open_store(project, lock=not args.dry_run)
    shard_plan = None
    undo = interrupt_on_sigterm()  # from the first word to the remote on
    try:
        if shard is not None:
            durations = recorded_durations(store, targets, remote, project)
            targets, shard_plan = plan_shards(targets, durations, shard)
        summary = Build(project, store, options, config, pool, remote).run(targets)
        summary.shard = shard_plan
    except KeyboardInterrupt:
        print("memotest: interrupted; running targets were stopped", flush=True)
        return 130
    finally:
        undo()
        if pool is not None:
            pool.close()  # the warm workers; a re-warming thread may note events till then
            if args.verbose:
                for event, times in pool.noted().items():
                    print(f"memotest: {event}" + (f" ({times} times)" if times > 1 else ""))
        if store is not None:
            try:
                if not args.dry_run:
                    collect_garbage(store, project.settings.max_size, verbose=args.verbose)
            finally:
                store.close()
    plugins.call("memotest_report", summary=summary, config=config)
    if args.dry_run:
        return 0
    return 0 if summary.ok else 1


def warm_pool(config: plugins.Config) -> WorkerPool:
    """This build's warm workers (started on first use, stopped by ``close``)."""
    from memotest.tracer.warm.pool import WorkerPool

    pool = WorkerPool(config=config)
    pool.preload = not config.options.no_preload
    pool.code_level = not config.options.whole_files
    pool.defer()  # the build says how many targets are left (re-warms)
    return pool


def recorded_durations(
    store: Store | None, targets: list[Target], remote: RemoteCache | None, project: Project
) -> dict[str, float | None]:
    """Each target's duration as its newest local record gives it, else as the remote's
    durations do (:mod:`memotest.remote.durations`); absent: never recorded."""
    if store is None:
        return {}
    from memotest.remote.durations import fetch_durations

    records = store.records([t.name for t in targets])
    out: dict[str, float | None] = {name: rec.duration for name, rec in records.items()}
    if remote is not None and len(out) < len(targets):
        known = fetch_durations(remote, store.roots.portable(str(project.path)))
        missing = [t.name for t in targets if t.name not in out]
        out.update({n: known[n] for n in missing if n in known})
    return out


def collect_garbage(store: Store, max_size: int, *, verbose: bool) -> None:
    """The store's periodic clean-up (:meth:`Store.gc_if_due`: the size bound ``max_size``,
    and what no record references); says what it removed with -v."""
    stats = store.gc_if_due(max_size)
    if stats is not None and verbose:
        print(
            f"memotest: store: evicted {stats.variants} least recently used records; removed "
            f"{stats.fingerprints} unused fingerprints and {stats.blobs} blobs "
            f"({stats.bytes / 1e6:.1f} MB)"
        )
