"""``memotest explain TARGET``: why a target would run, or that it is up to date."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from memotest.commands.options import add_file_option, add_plugin_options

if TYPE_CHECKING:
    from memotest.check.plan import Fresh, Stale
    from memotest.commands.common import Recorded
    from memotest.load import plugins
    from memotest.world.fingerprint import FileStates

# What explaining needs is imported when explaining (every command's parser is built on
# each start).


def add_parser(sub: argparse._SubParsersAction, plugin_options: bool = True) -> None:
    p = sub.add_parser(
        "explain",
        help="say why a target would run, naming the path, variable or field that changed",
        description="For each named target, say whether it is up to date or why it would "
        "run: the exact input path and how it changed (content, appeared, disappeared, "
        "entries gained or lost), the environment variable, or the definition field.",
    )
    p.add_argument("targets", nargs="*", metavar="TARGET")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every changed input of a stale target, not only the first",
    )
    p.add_argument(
        "--select",
        choices=("tests", "files"),
        default=None,
        help="tests: say which tests of a stale test file would run, and why",
    )
    add_file_option(p)
    add_plugin_options(p, plugin_options)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from memotest.load import plugins

    global STARTED_NS
    STARTED_NS = time.time_ns()
    with plugins.configured(args) as config:
        return explain(config)


#: When this command started: a record whose run started later was made while the
#: targets were listed (a loader's memoized command, ``pytest-collection:...``, which ran
#: because it was not up to date), not found up to date.
STARTED_NS: int | None = None


def explain(config: plugins.Config) -> int:
    from memotest.check.keys import target_key
    from memotest.check.plan import Stale, plan
    from memotest.check.select import decide
    from memotest.check.shaping import granted
    from memotest.commands.common import load_or_recorded, open_store, targets_after_pytest
    from memotest.loop.build import select
    from memotest.run.observe import file_states
    from memotest.world.roots import of as roots_of

    args = config.options
    args.targets = targets_after_pytest(args, args.targets, "explain")
    project, recorded = load_or_recorded(config, args.targets)
    if recorded is not None:
        return explain_records(recorded, verbose=args.verbose)
    assert project is not None
    targets = select(project, args.targets)
    named = {
        t.name for t in targets if t.name in args.targets or t.name.split(":", 1)[0] in args.targets
    }
    targets = [t for t in targets if t.name in named] or targets
    with open_store(project, lock=False) as store:
        shaping = granted(project.settings, code_level=True)
        roots = roots_of(project.root, project.settings.roots)
        keys = {
            t.name: target_key(t, project.settings, shaping=shaping, roots=roots) for t in targets
        }
        states = file_states(project)
        verdicts = plan(targets, keys, store, states)
        parts: dict[str, str] = {}
        if (args.select or project.settings.select) == "tests":
            for t in targets:
                v = verdicts[t.name]
                if isinstance(v, Stale) and v.kind in ("input", "failed") and v.record:
                    sel = decide(v.record, keys[t.name], states, store)
                    if sel is not None:
                        parts[t.name] = sel.describe()
        say(verdicts, parts, states if args.verbose else None)
    return 0


def say(
    verdicts: dict[str, Fresh | Stale],
    parts: dict[str, str] | None = None,
    states: FileStates | None = None,
) -> None:
    """One line per target; ``parts``: the tests a stale one would run (``--select``);
    with ``states`` (``-v``), every changed input of a stale one, a line each."""
    from memotest.check.plan import Fresh, describe_all

    for name, v in verdicts.items():
        if isinstance(v, Fresh):
            if STARTED_NS is not None and v.record.started_ns >= STARTED_NS:
                print(
                    f"{name}: was not up to date: it ran again to list the targets "
                    f"(passed in {v.record.duration:.1f}s), and is up to date now"
                )
                continue
            print(f"{name}: up to date (last run passed in {v.record.duration:.1f}s)")
            continue
        if parts and name in parts:
            print(f"{name}: would run {parts[name]}; {v.reason}")
        else:
            print(f"{name}: would run: {v.reason}")
        if states is not None and len(v.changed) > 1:
            for line in describe_all(v, states):
                print(f"    {line}")


def explain_records(recorded: Recorded, verbose: bool = False) -> int:
    """``explain`` for records no targets file defines: their inputs are checked; their
    definition and environment belong to the tool that recorded them (tox, make, nox),
    which checks them itself, so they are taken as recorded."""
    from memotest.check.keys import TargetKey
    from memotest.check.plan import plan
    from memotest.commands.common import open_store
    from memotest.model import Target
    from memotest.run.observe import file_states

    records = recorded.records
    targets = [Target(name, "", str(recorded.root)) for name in records]
    keys = {
        name: TargetKey(rec.def_hash, rec.definition, rec.env_hash, rec.env)
        for name, rec in records.items()
    }
    with open_store(recorded.project, lock=False) as store:
        states = file_states(recorded.project)
        verdicts = plan(targets, keys, store, states)
        say(verdicts, None, states if verbose else None)
    print(
        f"{recorded.note()}: its inputs were checked; its command and environment are "
        "checked by the tool that runs it"
    )
    return 0
