"""Which code each test ran, inside a pytest run forked from a warm worker.

``memotest_pytest.narrow`` registers this module as a pytest plugin when the run notes
the code it executes (``memotest/worker/code_watch.py``). It labels the parts of the run
(``code_watch.phase``): each test's setup, call and teardown (``t:`` and the node id),
and each fixture's setup and finalizers (``f:`` and the fixture's place and name). What
runs outside them (imports, collection, the session's end) is the run's global part,
which every test depends on. A fixture's code counts for **every test that uses it**
(``code_watch.uses``), whichever test's setup ran it: a session fixture runs once, in the
setup of the first test that asks for it, and the others get its cached value, which the
code of its setup made. A test uses the fixtures of its closure (``item.fixturenames``,
every definition of each name, overridden ones too) and those it asked for by name while
it ran (``request.getfixturevalue``: ``item._request._fixture_defs``).

memotest reads the report (``memotest_pytest/selection.py``): the map from each test to
the code it depends on, what test-level selection runs again when a function changes.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any

import pytest

#: The worker's module that notes the code a run executes (``memotest/worker/boot.py``).
WATCH = "_memotest_worker.code_watch"


def watcher() -> Any:
    """The worker's code watcher, or None (not forked from a warm worker)."""
    return sys.modules.get(WATCH)


def fixture_label(fixturedef: Any) -> str:
    return f"f:{getattr(fixturedef, 'baseid', '')}::{getattr(fixturedef, 'argname', '')}"


def used_fixtures(item: pytest.Item) -> set[str]:
    """The labels of every fixture definition ``item`` may have used."""
    labels: set[str] = set()
    info = getattr(item, "_fixtureinfo", None)
    by_name = getattr(info, "name2fixturedefs", None) or {}
    for name in getattr(item, "fixturenames", ()) or ():
        for fixturedef in by_name.get(name, ()):
            labels.add(fixture_label(fixturedef))
    request = getattr(item, "_request", None)
    for fixturedef in (getattr(request, "_fixture_defs", None) or {}).values():
        labels.add(fixture_label(fixturedef))
    return labels


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, Any, None]:
    watch = watcher()
    label = "t:" + item.nodeid
    before = watch.phase(label) if watch is not None else None
    try:
        yield
    finally:
        if watch is not None:
            watch.phase(before if before is not None else "")
            watch.uses(label, used_fixtures(item))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> None:
    """The fixtures the test asked for by name while it ran, before pytest forgets them."""
    watch = watcher()
    if watch is not None:
        watch.uses("t:" + item.nodeid, used_fixtures(item))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Generator[None, Any, None]:
    watch = watcher()
    before = watch.phase(fixture_label(fixturedef)) if watch is not None else None
    try:
        yield
    finally:
        if before is not None:
            watch.phase(before)


def watch_finalizers() -> None:
    """Labels what a fixture's finalizers run (its code after ``yield``, what it gave
    ``request.addfinalizer``) as that fixture's: pytest has no hook before them."""
    from _pytest.fixtures import FixtureDef

    real = getattr(FixtureDef, "finish", None)
    if real is None or getattr(real, "__memotest__", False):
        return

    def finish(self: Any, request: Any) -> None:
        watch = watcher()
        before = watch.phase(fixture_label(self)) if watch is not None else None
        try:
            return real(self, request)
        finally:
            if before is not None:
                watch.phase(before)

    finish.__memotest__ = True  # type: ignore[attr-defined]
    finish.__wrapped__ = real  # type: ignore[attr-defined]
    FixtureDef.finish = finish  # type: ignore[method-assign]
