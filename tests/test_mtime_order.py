"""The order of modification times a program decides by (``memotest/inputs/order.py``):
real targets under the real shim; a ``touch`` that flips which file is newer re-runs them,
one that keeps the order does not."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import build_statuses, memotest

HOUR = 3_600 * 10**9


def statuses(root: Path) -> dict[str, str]:
    _code, out, st = build_statuses(root, "-v")
    assert st, out
    return st


def set_mtime(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


def newer_check(root: Path, command: str) -> Path:
    """A project whose target passes while ``gen`` is newer than ``src`` (both an hour
    back, so nothing is racily clean)."""
    root.mkdir(parents=True)
    (root / "memotest.toml").write_text(f"[targets.t]\ncommand = {command!r}\n")
    (root / "src").write_text("source\n")
    (root / "gen").write_text("generated\n")
    now = time.time_ns()
    set_mtime(root / "src", now - 2 * HOUR)
    set_mtime(root / "gen", now - HOUR)
    return root


def test_touching_the_source_of_a_newer_than_check_reruns_it(tmp_path):
    root = newer_check(tmp_path / "p", "test gen -nt src && echo fresh || exit 1")
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    set_mtime(root / "src", time.time_ns() - HOUR // 2)  # content kept, now the newer one
    out = memotest("explain", "t", cwd=root).stdout.decode()
    # the two files whose relation flipped, not only the input's path (the oldest)
    # ... and not as a change of the oldest file (the order's path): issue 28
    assert "t: would run: modification-time order of the 2 files it stat'ed changed" in out, out
    assert f"{root / 'src'} is now newer than {root / 'gen'}" in out, out
    assert statuses(root) == {"t": "failed"}


def test_touching_both_files_keeping_their_order_stays_cached(tmp_path):
    root = newer_check(tmp_path / "p", "test gen -nt src && echo fresh || exit 1")
    assert statuses(root) == {"t": "passed"}
    now = time.time_ns()
    set_mtime(root / "src", now - HOUR // 2)
    set_mtime(root / "gen", now - HOUR // 4)
    assert statuses(root) == {"t": "cached"}
    assert statuses(root) == {"t": "cached"}  # (the order was seen to hold: stored so)
    set_mtime(root / "gen", now - 3 * HOUR)  # back in time: older than src now
    assert statuses(root) == {"t": "failed"}


def test_equal_mtimes_that_come_apart_rerun(tmp_path):
    # ``-nt`` is strict: same mtime is "not newer"; make takes it as up to date
    root = newer_check(tmp_path / "p", "test src -nt gen && exit 1 || echo ok")
    same = time.time_ns() - HOUR
    set_mtime(root / "src", same)
    set_mtime(root / "gen", same)
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    set_mtime(root / "src", same + 10**9)
    assert statuses(root) == {"t": "failed"}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_make_recipe_reruns_when_its_prerequisite_gets_newer(tmp_path):
    root = newer_check(tmp_path / "p", "make -s gen")
    (root / "Makefile").write_text("gen: src\n\t@echo gen is out of date; exit 1\n")
    set_mtime(root / "Makefile", time.time_ns() - 3 * HOUR)
    assert statuses(root) == {"t": "passed"}  # gen is up to date: the recipe does not run
    assert statuses(root) == {"t": "cached"}
    set_mtime(root / "src", time.time_ns() - HOUR // 2)
    assert statuses(root) == {"t": "failed"}


def test_a_file_only_read_keeps_its_mtime_out_of_the_order(tmp_path):
    # ``cat`` opens and reads: no stat by path, so a touch of it re-runs nothing
    root = newer_check(tmp_path / "p", "cat src gen")
    assert statuses(root) == {"t": "passed"}
    set_mtime(root / "src", time.time_ns() - HOUR // 2)
    assert statuses(root) == {"t": "cached"}
