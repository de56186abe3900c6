"""What a forked run's report says beyond what memotest itself reads in it: plugins tell.

A run forked from a warm worker reports, at its end, what its process did (the modules
it imported, the code it executed, the folders it listed...) and what the worker-side
modules of plugins added (``memotest/worker/extensions.py``). What those additions mean
for preloading is the plugin's to say, through the hook ``memotest_warm_report``: each
plugin returns a :class:`WarmReading` of its part, and memotest takes them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WarmReading:
    """A plugin's reading of a forked run's report."""

    #: Modules (or packages: their modules too) the run must import itself: never
    #: preloaded again, and a run whose worker had preloaded one of them runs again as a
    #: fresh process (its result is not what a fresh run's would be).
    fresh: frozenset[str] = frozenset()
    #: Whether the runs with this run's arguments keep their Python files whole whatever
    #: they execute: their next runs do not note the code they execute.
    whole: bool = False
    #: Why the run's result may not be what a fresh run's would be (each a phrase, such
    #: as "tests/sub/conftest.py is not its worker's"): the run runs again as a fresh
    #: process.
    unfaithful: tuple[str, ...] = ()


def read_report(report: dict[str, Any], config: Any = None) -> WarmReading:
    """What the plugins read in ``report``, taken together."""
    from memotest.load import plugins

    readings = plugins.call("memotest_warm_report", config=config, report=report)
    found = [r for r in readings if r is not None]
    return WarmReading(
        frozenset().union(*(r.fresh for r in found)),
        any(r.whole for r in found),
        tuple(why for r in found for why in r.unfaithful),
    )


def marked(name: str, marks: set[str] | frozenset[str]) -> bool:
    """Whether ``name`` or a package above it is among ``marks``."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in marks for i in range(1, len(parts) + 1))
