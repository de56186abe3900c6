"""Link counts (``memotest/inputs/file.py``): held only where a traced call could show
them. Real targets under the real shim: a file only read keeps replaying when a hard link
to it is made elsewhere (uv's package cache), a module an import found in an installed
package's folder too, and a target that stats the file by path runs again."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from conftest import build_statuses

PY = sys.executable
SITE = "venv/lib/python3/site-packages"


def project(root: Path, script: str) -> Path:
    """A project whose one target ``t`` runs ``python -B -c SCRIPT``."""
    root.mkdir(parents=True, exist_ok=True)
    command = [PY, "-B", "-c", textwrap.dedent(script)]
    (root / "memotest.toml").write_text(f"[targets.t]\ncommand = {command!r}\n")
    return root


def statuses(root: Path) -> dict[str, str]:
    _code, out, st = build_statuses(root, "-v")
    assert st, out
    return st


def linked(cache: Path, target: Path, text: str) -> Path:
    """``text`` in ``cache``, hard-linked at ``target`` (as uv installs from its cache)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(text)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.link(cache, target)
    return cache


def test_a_file_only_read_replays_when_a_link_to_it_is_made_elsewhere(tmp_path):
    root = project(tmp_path / "p", "print(open('data.txt').read())")
    cache = linked(tmp_path / "cache/data.txt", root / "data.txt", "v1")
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    os.link(cache, tmp_path / "cache/another-venv.txt")  # another venv from the cache
    assert statuses(root) == {"t": "cached"}
    os.unlink(tmp_path / "cache/another-venv.txt")
    os.unlink(cache)  # the cache pruned: one name left
    assert statuses(root) == {"t": "cached"}
    (root / "data.txt").write_text("v2")  # its content still counts
    assert statuses(root) == {"t": "passed"}


def test_a_target_that_stats_the_file_reruns_when_its_link_count_changes(tmp_path):
    script = """
        import os
        print(os.stat('data.txt').st_nlink, open('data.txt').read())
    """
    root = project(tmp_path / "p", script)
    cache = linked(tmp_path / "cache/data.txt", root / "data.txt", "v1")
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    os.link(cache, tmp_path / "cache/another-venv.txt")
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}


def test_an_installed_module_replays_when_its_cache_entry_gains_a_link(tmp_path):
    script = f"""
        import sys
        sys.path.insert(0, {SITE!r})
        import pkg
        print(pkg.VALUE)
    """
    root = project(tmp_path / "p", script)
    cache = linked(
        tmp_path / "cache/pkg/__init__.py", root / SITE / "pkg/__init__.py", "VALUE = 1\n"
    )
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    os.link(cache, tmp_path / "cache/other-venv-init.py")
    assert statuses(root) == {"t": "cached"}
    (root / SITE / "pkg/__init__.py").write_text("VALUE = 2\n")
    assert statuses(root) == {"t": "passed"}
