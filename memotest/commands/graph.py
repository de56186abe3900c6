"""``memotest graph``: the order and conflict edges between targets, and why."""

from __future__ import annotations

import argparse

from memotest.commands.options import add_file_option


def add_parser(sub: argparse._SubParsersAction, plugin_options: bool = True) -> None:
    p = sub.add_parser(
        "graph",
        help="show which targets never run together, and why",
        description="Print the edges the scheduler uses: declared needs, conflicts found "
        "in the targets' last records (one writes what the other reads or writes), and "
        "edges learned from hazards, each with the path that caused it. An edge A -> B "
        "means A runs before B and never at the same time.",
    )
    add_file_option(p)
    p.add_argument("--format", choices=("dot", "json"), default="dot", help="default: dot")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json

    from memotest.commands.common import open_store
    from memotest.load.config import load_project
    from memotest.load.plugins import Config
    from memotest.loop import schedule

    project = load_project(Config(args))
    targets = list(project.targets.values())
    serial = schedule.serial_order(targets)
    with open_store(project, lock=False) as store:
        records = store.records(project.targets)
        footprints = {
            n: schedule.Footprint.of(((i.path, i.kind) for i in r.inputs), r.writes)
            for n, r in records.items()
        }
        edges = [schedule.Edge(n, t.name, "needs") for t in targets for n in t.needs]
        edges += schedule.conflict_edges(footprints, serial)
        edges += schedule.learned_edges(
            store.get_meta(schedule.LEARNED_KEY), set(project.targets), serial
        )
    if args.format == "json":
        print(
            json.dumps(
                {
                    "targets": [t.name for t in targets],
                    "edges": [
                        {"before": e.before, "after": e.after, "kind": e.kind, "path": e.path}
                        for e in edges
                    ],
                },
                indent=2,
            )
        )
        return 0
    print("digraph memotest {")
    print("  rankdir=LR;")
    for t in targets:
        print(f"  {json.dumps(t.name)};")
    style = {"needs": "solid", "conflict": "dashed", "learned": "bold"}
    for e in edges:
        label = e.kind + (f": {e.path}" if e.path else "")
        print(
            f"  {json.dumps(e.before)} -> {json.dumps(e.after)} "
            f"[label={json.dumps(label)}, style={style.get(e.kind, 'solid')}];"
        )
    print("}")
    return 0
