"""``memotest/tracer/warm/stale.py``: the check before each fork sees what ``path_sig``
sees, path by path (a file rewritten, replaced, removed or made; a folder listed or only
looked up)."""

from __future__ import annotations

import os

from memotest.tracer.warm.stale import not_as_they_were
from memotest.tracer.warm.startup import path_sig


def test_every_change_path_sig_sees_and_only_those(tmp_path):
    for name in ("same", "rewritten", "replaced", "removed", "grown"):
        (tmp_path / name).write_text("a")
    for name in ("listed", "looked_up", "listed_gains"):
        (tmp_path / name).mkdir()
    listed = frozenset(str(tmp_path / n) for n in ("listed", "listed_gains"))
    paths = [str(tmp_path / n) for n in os.listdir(tmp_path)] + [str(tmp_path / "made")]
    snapshot = {p: path_sig(p, p in listed) for p in sorted(paths)}
    assert not list(not_as_they_were(snapshot, listed))
    os.utime(tmp_path / "rewritten", ns=(1, 1))
    (tmp_path / "replaced.new").write_text("a")
    os.replace(tmp_path / "replaced.new", tmp_path / "replaced")
    (tmp_path / "removed").unlink()
    (tmp_path / "grown").write_text("ab")
    (tmp_path / "made").write_text("a")
    (tmp_path / "listed_gains" / "new").write_text("a")
    (tmp_path / "looked_up" / "new").write_text("a")  # only a folder: still one
    expected = {
        p: path_sig(p, p in listed) for p in snapshot if path_sig(p, p in listed) != snapshot[p]
    }
    assert set(expected) == {
        str(tmp_path / n)
        for n in ("rewritten", "replaced", "removed", "grown", "made", "listed_gains")
    }
    assert dict(not_as_they_were(snapshot, listed)) == expected
