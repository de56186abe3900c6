"""A path that only yes-or-no probes found (``os.path.isfile``, ``Path.exists``...) is held
by what is there, not by its content (``memotest/inputs/probed.py``): an edit replays the
run; a change of type, a re-pointed link, or any other look at the file (a read, a
``stat`` for its size, a ``Path`` subclass's own ``stat``, a trace function inside the
probe) runs it again. Real builds under the real shim.
"""

from __future__ import annotations

import os
import sys

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable
# What the warm worker and the pytest processes memotest watches do before the tests.
INSTALL = "from memotest.worker import untimed; assert untimed.install(); import os, pathlib; "

PROBES = "d = 'work/data'; print(os.path.isfile(d), pathlib.Path(d).exists(), os.path.isdir(d))"
#: Each way of looking at ``data`` besides the probes: an edit of it must run again.
LOOKS = {
    "read": "print(open('work/data').read())",
    "size": "print(os.stat('work/data').st_size)",
    "subclass": (
        "class P(type(pathlib.Path())):\n"
        "    def stat(self, **kw):\n"
        "        st = super().stat(**kw); print(st.st_size); return st\n"
        "P('work/data').is_file()"
    ),
    "tracer": (
        "import sys\n"
        "def t(frame, event, arg):\n"
        "    if event == 'call' and frame.f_code.co_name == 'isfile':\n"
        "        print(os.stat('work/data').st_size)\n"
        "sys.settrace(t); os.path.isfile('work/data'); sys.settrace(None)"
    ),
}


def project(tmp_path, code: str):
    return write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = [{PY!r}, '-c', {INSTALL + code!r}]\n",
            "work/data": "one\n",  # in a folder nobody lists (`python -c` lists its own)
        },
    )


def build(root, *args: str) -> tuple[str, dict[str, str]]:
    _code, out, got = build_statuses(root, "-v", *args)
    return out, got


def test_an_edit_of_a_file_only_probed_replays(tmp_path):
    root = project(tmp_path, PROBES)
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/data").write_text("two, longer\n")
    out, got = build(root)
    assert got == {"t": "cached"}, out
    show = memotest("show", "--paths", "t", cwd=root).stdout.decode()
    assert f"probed {root / 'work/data'}" in show, show


@pytest.mark.parametrize("look", sorted(LOOKS))
def test_any_other_look_at_a_probed_file_runs_again_on_an_edit(tmp_path, look):
    root = project(tmp_path, PROBES + "\n" + LOOKS[look])
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/data").write_text("two, longer\n")
    out, got = build(root)
    assert got == {"t": "passed"}, out
    assert "work/data: content changed" in out, out


@pytest.mark.parametrize("change", ["folder", "gone", "link"])
def test_what_a_probe_tells_runs_again_when_it_changes(tmp_path, change):
    root = project(tmp_path, PROBES)
    (root / "work/other").write_text("x\n")
    os.rename(root / "work/data", root / "work/real")
    os.symlink("real", root / "work/data")
    out, got = build(root)
    assert got == {"t": "passed"}, out
    (root / "work/data").unlink()
    if change == "folder":
        (root / "work/data").mkdir()
    elif change == "link":
        os.symlink("other", root / "work/data")  # a file too: only the link's text differs
    out, got = build(root)
    assert got == {"t": "passed"}, out


def test_pytest_collection_replays_after_a_test_file_edit(tmp_path):
    """pytest's collection probes every test file and reads none: an edit of one runs
    that file again, not the collection."""
    root = write_tree(
        tmp_path / "proj",
        {
            "tests/test_a.py": "def test_a():\n    assert 1\n",
            "tests/test_b.py": "def test_b():\n    assert 2\n",
        },
    )
    out, got = build(root, "--pytest", "tests")
    assert got == {"pytest:tests/test_a.py": "passed", "pytest:tests/test_b.py": "passed"}, out
    (root / "tests/test_a.py").write_text("def test_a():\n    assert 1 + 0  # edited\n")
    out, got = build(root, "--pytest", "tests")
    assert got == {"pytest:tests/test_a.py": "passed", "pytest:tests/test_b.py": "cached"}, out
    show = memotest("show", "--paths", "--pytest", "tests", "pytest-collection:tests", cwd=root)
    text = show.stdout.decode()
    assert "recorded runs (variants): 1;" in text, text  # a second run would be a second
    assert f"probed {root / 'tests/test_a.py'}" in text, text
