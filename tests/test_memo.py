"""``run_memoized``: one command memoized, as the tox, nox and make adapters use it."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memotest.hookspecs import hookimpl
from memotest.load import plugins
from memotest.load.plugins import Config
from memotest.memo import run_memoized
from memotest.model import Target
from memotest.reporting.report import TargetResult

PY = sys.executable
SLOW = "import time; print('first', flush=True); time.sleep(1.5); print('second', flush=True)"


class Recorder:
    """A byte stream that notes when each write arrived."""

    def __init__(self) -> None:
        self.writes: list[tuple[float, bytes]] = []

    def write(self, data: bytes) -> int:
        self.writes.append((time.monotonic(), bytes(data)))
        return len(data)

    def flush(self) -> None:
        pass

    @property
    def data(self) -> bytes:
        return b"".join(d for _, d in self.writes)


def target(tmp_path: Path, code: str) -> Target:
    return Target(name="slow", command=(PY, "-c", code), cwd=str(tmp_path))


def test_a_run_is_shown_as_it_goes_and_a_replay_is_returned(tmp_path: Path) -> None:
    out = Recorder()
    result = run_memoized(target(tmp_path, SLOW), root=tmp_path, tee=out)
    ended = time.monotonic()
    assert result.status == "passed" and not result.cached and result.streamed
    assert out.data == result.log == b"first\nsecond\n"
    first_seen = next(t for t, d in out.writes if b"first" in d)
    assert ended - first_seen > 0.7  # while the command slept, not after it ended

    again = Recorder()
    replay = run_memoized(target(tmp_path, SLOW), root=tmp_path, tee=again)
    assert replay.cached and not replay.streamed
    assert replay.log == b"first\nsecond\n" and again.writes == []  # the caller prints it


class Broken:
    def write(self, data: bytes) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass


def test_a_reader_that_is_gone_does_not_stop_the_command(tmp_path: Path) -> None:
    result = run_memoized(target(tmp_path, "print('x' * 100000)"), root=tmp_path, tee=Broken())
    assert result.status == "passed"
    assert result.log == b"x" * 100000 + b"\n"


def test_records_made_outside_a_targets_file_can_be_listed_shown_and_explained(
    tmp_path: Path,
) -> None:
    """The tox plugin, the make shell and the nox helper record under their own names
    (tox:ENV...), which no targets file defines: list, show and explain find them."""
    from conftest import memotest

    data = tmp_path / "data.txt"
    data.write_text("one\n")
    time.sleep(0.1)  # older than the run's start, or it "changed while the target ran"
    t = Target(name="tox:lint", command=("cat", "data.txt"), cwd=str(tmp_path))
    assert run_memoized(t, root=tmp_path).status == "passed"
    sub = tmp_path / "sub"
    sub.mkdir()  # from a folder below: the store is looked for upwards

    proc = memotest("list", cwd=sub)
    assert proc.returncode == 0, proc.stderr
    assert b"tox:lint  last passed" in proc.stdout
    proc = memotest("show", "tox:lint", "--log", cwd=sub)
    assert proc.returncode == 0 and proc.stdout == b"one\n", proc.stderr
    proc = memotest("explain", "tox:lint", cwd=sub)
    assert proc.returncode == 0 and b"tox:lint: up to date" in proc.stdout, proc.stderr

    data.write_text("two\n")
    proc = memotest("explain", "tox:lint", cwd=sub)
    assert b"tox:lint: would run: " + str(data).encode() + b": content changed" in proc.stdout

    proc = memotest("explain", "tox:other", cwd=sub)  # no such record: the usual error
    assert proc.returncode == 2 and b"no memotest.toml found" in proc.stderr


class TargetHooks:
    """A plugin that notes the target hooks and adds a variable to the command's env."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, str, str | None]] = []

    @hookimpl
    def memotest_before_target(self, target: Target, env: dict[str, str]) -> None:
        env["FROM_PLUGIN"] = "set by the plugin"
        self.fired.append(("before", target.name, None))

    @hookimpl
    def memotest_after_target(self, target: Target, result: TargetResult) -> None:
        self.fired.append(("after", target.name, result.status))


@pytest.fixture
def hooks() -> Iterator[tuple[TargetHooks, list[dict[str, Any]]]]:
    """The plugin registered on the plugin manager, and the keyword arguments of every
    target hook call (pluggy's hook call monitoring)."""
    pm = plugins.manager()
    plugin = TargetHooks()
    calls: list[dict[str, Any]] = []

    def before(name: str, impls: object, kwargs: dict[str, Any]) -> None:
        if name in ("memotest_before_target", "memotest_after_target"):
            calls.append(dict(kwargs))

    pm.register(plugin, name="test-target-hooks")
    undo = pm.add_hookcall_monitoring(before, lambda *_: None)
    try:
        yield plugin, calls
    finally:
        undo()
        pm.unregister(plugin)


def test_run_memoized_fires_the_target_hooks_with_a_config(tmp_path: Path, hooks) -> None:
    plugin, calls = hooks
    t = target(tmp_path, "import os; print(os.environ['FROM_PLUGIN'])")
    ran = run_memoized(t, root=tmp_path)
    assert (ran.status, ran.cached, ran.log) == ("passed", False, b"set by the plugin\n")
    assert plugin.fired == [("before", "slow", None), ("after", "slow", "passed")]
    # What the plugin adds to the env is not part of the key: the next call replays.
    replayed = run_memoized(t, root=tmp_path)
    assert (replayed.cached, replayed.log) == (True, b"set by the plugin\n")
    assert plugin.fired[2:] == [("after", "slow", "cached")]
    assert len(calls) == 3
    assert all(isinstance(c["config"], Config) for c in calls)
