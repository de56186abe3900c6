"""A file changed just before a run is not one changed while it ran (``model.changed_since``:
the run's start on the file system's own clock). Real commands under the real shim.

The case it is for: ``uv pip install -e`` rewrites a ``.pth`` a few milliseconds before the
session's command starts; a blanket 50 ms slack took that for a change during the run,
and the result was not kept, so a second run never replayed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memotest.hookspecs import hookimpl
from memotest.load import plugins
from memotest.memo import run_memoized
from memotest.model import Target

SH = "/bin/sh"


class JustBefore:
    """Runs ``action`` in ``memotest_before_target``: right before the command starts."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action

    @hookimpl
    def memotest_before_target(self, target: Target, env: dict[str, str]) -> None:
        self.action()


@pytest.fixture
def just_before() -> Iterator[Callable[[Callable[[], None]], None]]:
    pm = plugins.manager()
    names: list[str] = []

    def register(action: Callable[[], None]) -> None:
        name = f"test-just-before-{len(names)}"
        pm.register(JustBefore(action), name=name)
        names.append(name)

    yield register
    for name in names:
        pm.unregister(name=name)


def test_a_file_rewritten_just_before_the_run_is_an_input_as_it_was(tmp_path: Path, just_before):
    data = tmp_path / "site.pth"

    def install() -> None:
        data.write_text("/src\n")  # as an installer does, every time
        time.sleep(0.015)  # past a coarse clock's tick, well inside the old 50 ms slack

    just_before(install)
    t = Target(name="t", command=("cat", str(data)), cwd=str(tmp_path))
    first = run_memoized(t, root=tmp_path)
    assert first.status == "passed" and first.log == b"/src\n"
    assert first.note is None, first.note  # kept: the change came before the start
    again = run_memoized(t, root=tmp_path)
    assert again.cached
    # A different content is still a change, of course.
    data.write_text("/other\n")
    third = run_memoized(t, root=tmp_path, force=False)
    assert not third.cached


def test_a_file_changed_while_the_command_ran_is_still_not_kept(tmp_path: Path, just_before):
    data = tmp_path / "data"
    data.write_text("one\n")
    time.sleep(0.1)

    def later() -> None:
        threading.Timer(0.3, lambda: data.write_text("two\n")).start()

    just_before(later)
    t = Target(name="t", command=(SH, "-c", f"cat {data}; sleep 1"), cwd=str(tmp_path))
    ran = run_memoized(t, root=tmp_path)
    assert ran.status == "passed" and ran.log == b"one\n"
    assert ran.note is not None and "changed while the target ran" in ran.note, ran.note
