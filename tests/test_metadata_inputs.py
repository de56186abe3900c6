"""Metadata a program can see, fingerprinted (``memotest/inputs/``): real targets under the
real shim, and a change of mode, entry type, symlink or link count between builds that
must run them again."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

from conftest import build_statuses

PY = sys.executable


def project(root: Path, targets: dict[str, str], files: dict[str, str]) -> Path:
    """A project whose targets run ``python -c SCRIPT``."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, script in targets.items():
        lines += [f"[targets.{name}]", f"command = [{PY!r}, '-c', {textwrap.dedent(script)!r}]"]
    (root / "memotest.toml").write_text("\n".join(lines) + "\n")
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def statuses(root: Path) -> dict[str, str]:
    _code, out, st = build_statuses(root, "-v")
    assert st, out
    return st


def test_chmod_minus_x_of_a_script_the_target_runs_reruns_it(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "memotest.toml").write_text('[targets.t]\ncommand = "./run.sh"\n')
    (root / "run.sh").write_text("#!/bin/sh\necho ok\n")
    os.chmod(root / "run.sh", 0o755)
    assert statuses(root) == {"t": "passed"}
    assert statuses(root) == {"t": "cached"}
    os.chmod(root / "run.sh", 0o644)
    assert statuses(root) == {"t": "failed"}


def test_a_listed_file_that_becomes_a_folder_reruns_a_scandir_is_file_reader(tmp_path):
    script = """
        import os
        files = [e.name for e in os.scandir('data') if e.is_file()]
        assert sorted(files) == ['a', 'b'], files
    """
    root = project(tmp_path / "p", {"t": script}, {"data/a": "1", "data/b": "2"})
    assert statuses(root) == {"t": "passed"}
    os.unlink(root / "data/b")
    os.mkdir(root / "data/b")
    assert statuses(root) == {"t": "failed"}


def test_a_walked_folder_that_becomes_a_symlink_reruns(tmp_path):
    script = """
        import os
        found = [os.path.join(d, f) for d, _, fs in os.walk('tree') for f in fs]
        assert found == ['tree/sub/x'], found
    """
    root = project(tmp_path / "p", {"t": script}, {"tree/sub/x": "1", "elsewhere/x": "1"})
    assert statuses(root) == {"t": "passed"}
    shutil.rmtree(root / "tree/sub")
    os.symlink(root / "elsewhere", root / "tree/sub")  # os.walk does not follow it
    assert statuses(root) == {"t": "failed"}


def test_a_folder_input_that_becomes_a_symlink_reruns(tmp_path):
    script = """
        import os
        assert not os.path.islink('data'), 'a link'
        assert open('data/x').read() == '1'
    """
    root = project(tmp_path / "p", {"t": script}, {"data/x": "1", "real/x": "1"})
    assert statuses(root) == {"t": "passed"}
    shutil.rmtree(root / "data")
    os.symlink("real", root / "data")
    assert statuses(root) == {"t": "failed"}


def test_a_hard_link_made_or_broken_reruns_a_target_that_looked_at_link_counts(tmp_path):
    script = """
        import os
        assert os.stat('a').st_nlink == 1, 'linked'
    """
    root = project(tmp_path / "p", {"t": script}, {"a": "1"})
    (root / "hidden").mkdir()
    assert statuses(root) == {"t": "passed"}
    os.link(root / "a", root / "hidden/b")
    assert statuses(root) == {"t": "failed"}
    os.unlink(root / "hidden/b")
    # Back to the state of the first run: its recorded run (a variant) holds again.
    assert statuses(root) == {"t": "cached"}
