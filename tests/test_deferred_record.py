"""A run's record is finished while the next target runs (``memotest/loop/build.py``): what
it holds of the file system must still be what the run left, not what the next one made.

The attack: at ``-j1``, ``b`` runs right after ``a`` (targets-file order, no edge between
them: an empty store knows no conflict) and changes two things ``a`` observed, which no
"changed while the target ran" check sees: the mode of a folder ``a`` stat'ed (a ``dir``
input has no change time in its fingerprint) and the symbolic link ``a`` read through,
re-pointed at an older file (the content hashed is that file's, older than ``a``'s
start). ``a`` looks for 3,000 absent paths first, so that its fingerprints of those two,
taken in path order, come tens of milliseconds after ``b`` could start: a build that
fingerprinted ``a``'s inputs after starting ``b`` would record ``b``'s folder mode and
link, and replay ``a`` in the next build although ``a`` would now fail.
"""

from __future__ import annotations

import os
import sys
import textwrap

from conftest import build_statuses

PY = sys.executable

A = """
    import os
    for i in range(3000):
        os.path.exists(f"aa/p{i:04d}")
    assert os.stat("zz_dir").st_mode & 0o777 == 0o755, oct(os.stat("zz_dir").st_mode)
    assert open("zz_link").read() == "one\\n"
"""


def test_a_record_finished_while_the_next_target_runs_holds_what_the_run_saw(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text(textwrap.dedent(A))
    (root / "old1").write_text("one\n")
    (root / "old2").write_text("two\n")
    (root / "zz_dir").mkdir(mode=0o755)
    os.chmod(root / "zz_dir", 0o755)
    os.symlink("old1", root / "zz_link")
    (root / "memotest.toml").write_text(
        textwrap.dedent(f"""
        [targets.a]
        command = ["{PY}", "a.py"]
        [targets.b]
        command = ["sh", "-c", "chmod 700 zz_dir && ln -sfn old2 zz_link"]
        """)
    )
    code, out, statuses = build_statuses(root, "-j1")
    assert code == 0, out
    assert statuses == {"a": "passed", "b": "passed"}, out
    code, out, statuses = build_statuses(root, "-j1", "--dry-run", "a")
    assert statuses == {"a": "skipped"}, out  # would run: zz_dir's mode, zz_link changed
    assert "would run" in out and ("zz_dir" in out or "zz_link" in out), out
