"""A pytest plugin for memotest's per-file targets (``python -m pytest -p memotest_pytest.narrow``).

Except in a partial run (below), it changes nothing about which tests run or how; it
changes what pytest *looks at* on the way to them, because memotest records everything a
target looks at as an input:

* **Collection goes straight to the named paths.** Since pytest 8, ``pytest tests/test_a.py``
  builds a node for every entry of every folder from the rootdir down to the file (and
  stats each one, in ``pytest_ignore_collect``), then keeps only the nodes on the way to
  ``tests/test_a.py``. The nodes of the other entries are made and thrown away, never
  collected. Their stats would make ``tests/test_b.py``, ``README.md`` and every other file
  of those folders an input of ``test_a.py``'s target, so that editing any of them would
  re-run it. This plugin answers ``pytest_ignore_collect`` with "ignore" for a path that is
  neither one of the named paths, nor inside one, nor a folder on the way to one: the
  entries pytest would throw away are skipped before it stats them. The folders' listings
  are still read (and recorded), so a new entry on the way is still seen.
* **Each test's outcome is reported to memotest** (``memotest_pytest.results``), when
  memotest's runner asks for it, for its per-test reports.
* **A partial run runs only some tests** (``build --select tests``): those memotest names
  in ``MEMOTEST_SELECT``, tests it does not know and every test after the first of those
  (``pytest_collection_modifyitems``); memotest replays the others' outcomes.
* **A part of a file runs only its share of the tests** (``build --pytest-split
  FILE=N``, ``memotest_pytest.split``): ``--memotest-part K/N`` keeps the tests whose
  position in the file's collection is K modulo N, so that one big file spreads over the
  job slots, as ``pytest -n`` spreads tests.
* **pytest-benchmark's storage folder holds where it is absent or a folder**
  (``pytest_configure``): its ``mkdir`` ends the same either way, so a record made where
  the folder was there replays in a fresh clone, and one made where the run made it
  replays where it is left (``docs/limits.md``, "A run's own leftovers").
* **A file with no tests passes.** memotest makes a target of every file pytest would
  collect, without importing them; one that turns out to hold no test (``pytest`` exit
  status 5, "no tests collected") is a test file with nothing to fail, so the run ends with
  status 0.

Given ``--pyargs``, or a path that does not exist, it stands aside (pytest reports the
error as usual); with ``MEMOTEST_PYTEST_NARROW=0`` in the environment too, for a suite
whose conftest hooks must see every file of those folders (``docs/limits.md``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from memotest_pytest.collect import ONLY, PART, named_paths
from memotest_pytest.results import start as record_results

#: The tests of a partial run (``memotest/check/select.py``'s ``SELECT_ENV``: this plugin runs
#: in the target's interpreter, which may not have memotest).
SELECT_ENV = "MEMOTEST_SELECT"
_WANTED = pytest.StashKey[tuple[tuple[str, ...], "Wanted | None"]]()
#: ``MEMOTEST_PYTEST_NARROW=0``: collect as pytest does by itself.
SWITCH = "MEMOTEST_PYTEST_NARROW"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        ONLY,
        dest="memotest_only",
        default=None,
        metavar="FILE",
        help="collect only FILE below the folders given (a file whose name pytest would "
        "read as a test selection)",
    )
    parser.addoption(
        PART,
        dest="memotest_part",
        default=None,
        metavar="K/N",
        help="run only the tests at positions K, K+N, K+2N... of the collection (1-based)",
    )


def part_of(config: pytest.Config) -> tuple[int, int] | None:
    """``--memotest-part K/N`` as ``(K, N)``; None without it."""
    raw = config.getoption("memotest_part", None)
    if not raw:
        return None
    k, _, n = str(raw).partition("/")
    try:
        part = (int(k), int(n))
    except ValueError:
        raise pytest.UsageError(f"{PART} {raw}: expected K/N") from None
    if not 1 <= part[0] <= part[1]:
        raise pytest.UsageError(f"{PART} {raw}: expected 1 <= K <= N")
    return part


class Wanted:
    """The named paths as strings, with every folder above them, for
    ``pytest_ignore_collect``'s answer at each entry of each folder pytest lists: one
    ``abspath`` and a set lookup or two per entry, where ``Path.parents`` made a path per
    level (tens of milliseconds per run in a folder of many entries)."""

    def __init__(self, named: tuple[Path, ...]) -> None:
        self.exact = frozenset(str(w) for w in named)
        self.prefixes = tuple(os.path.join(str(w), "") for w in named)
        self.above = frozenset(str(p) for w in named for p in w.parents)

    def keeps(self, collection_path: Path) -> bool:
        """Whether pytest decides for ``collection_path``: a named path, inside one, or
        a folder on the way to one."""
        path = os.path.abspath(collection_path)
        return path in self.exact or path in self.above or path.startswith(self.prefixes)


def _wanted(config: pytest.Config) -> Wanted | None:
    """The named paths, or None: do not narrow. Kept per ``config.args``: a session
    forked from a prepared warm worker has its own (``worker_side.run_prepared``)."""
    args = tuple(config.args)
    if _WANTED in config.stash and config.stash[_WANTED][0] == args:
        return config.stash[_WANTED][1]
    off = os.environ.get(SWITCH, "").strip().lower() in ("0", "off", "no", "false")
    named = None if off else named_paths(config)
    wanted = None if named is None else Wanted(named)
    config.stash[_WANTED] = (args, wanted)
    return wanted


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, which makes its storage
def pytest_configure(config: pytest.Config) -> None:
    """pytest-benchmark's storage folder, made or found, told to the shim as "absent or a
    directory" (``memotest_walk.benchmark_storage_or_dir``, the wrapping tox's and nox's
    pytest get): in each target, and in the ``--pytest`` collection, which loads this
    plugin too (``collect.NARROW``); in a run forked from a worker that configured
    pytest, at the worker's configuration, whose record each run holds."""
    if "pytest_benchmark" in sys.modules:
        from memotest_pytest.walk_path.memotest_walk import benchmark_storage_or_dir

        benchmark_storage_or_dir()


@pytest.hookimpl(tryfirst=True)  # before conftests' own, which may answer False
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    wanted = _wanted(config)
    if wanted is None or wanted.keeps(collection_path):
        return None  # a named path, inside one, or on the way to one: pytest decides
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Each test's result (``memotest_pytest.results``); in a run that notes the code it
    executes, which code each test ran too (``memotest_pytest.attribute``). At the
    session's start, not at ``pytest_configure``: a run forked from a warm worker that
    configured pytest (``worker_side.prepare``) starts here, with its own environment."""
    config = session.config
    record_results(config)
    from memotest_pytest import attribute

    if attribute.watcher() is not None and attribute.watcher().EXECUTED:
        attribute.watch_finalizers()
        config.pluginmanager.register(attribute, "memotest-attribute")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """A partial run (``memotest/check/select.py``: ``MEMOTEST_SELECT``, the ids to run and the
    ids memotest knows): keeps, in their order, the tests named, those memotest does not
    know (new) and every test after the first kept (shared state flows forward);
    deselects the others, whose outcomes memotest replays. A part of a file
    (``--memotest-part``) keeps its share first."""
    part = part_of(config)
    if part is not None:
        k, n = part
        share = [item for i, item in enumerate(items) if i % n == k - 1]
        if len(share) != len(items):
            others = [item for i, item in enumerate(items) if i % n != k - 1]
            config.hook.pytest_deselected(items=others)
            items[:] = share
    raw = os.environ.get(SELECT_ENV)
    if not raw:
        return
    try:
        doc = json.loads(raw)
        run, known = set(doc["run"]), set(doc["known"])
    except (ValueError, KeyError, TypeError):
        return  # not understood: every test runs
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if kept or item.nodeid in run or item.nodeid not in known:
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
