"""A ``.py`` file a run stat'ed only through a yes-or-no probe (``os.path.isfile``,
``Path.exists``...: ``memotest/worker/untimed.py``) is still held by the code of it that
ran: the probe hands its caller no size and no time (``code_watch.noting``). pytest's
collection asks so of every test file and conftest. A stat whose result the run's own
code sees (its own function named like a probe, a ``Path`` subclass's ``stat``) keeps
the file whole. Real pytest builds forked from a warm worker, under the real shim."""

from __future__ import annotations

import os
import pathlib
from pathlib import Path

from conftest import build_statuses, needs_code_noting, write_tree

pytestmark = needs_code_noting

PKG_A = """
def used(x):
    return x + 1


def unused(x, y=2):
    return x + y
"""
EDITED = PKG_A.replace("return x + y", "return x - y + 0")  # another size too

PROBES = """
import os
import pathlib

from pkg import a


def test_probe():
    assert a.used(1) == 2
    assert os.path.exists(a.__file__) and os.path.isfile(a.__file__)
    assert not os.path.isdir(a.__file__) and not os.path.islink(a.__file__)
    path = pathlib.Path(a.__file__)
    assert path.exists() and path.is_file() and not path.is_dir()
"""

#: The run's own function, named as a probe: it sees the size.
OWN = """
import os

from pkg import a

SIZE = {size}


def isfile(path):
    return os.stat(path).st_size == SIZE


def test_own():
    assert a.used(1) == 2
    assert isfile(a.__file__)
"""

#: A path class whose ``stat`` keeps what it found, asked ``is_file()``.
SUBCLASS = """
import pathlib

from pkg import a

SIZE = {size}
SEEN = []


class Kept(type(pathlib.Path())):
    def stat(self, *args, **kwargs):
        found = super().stat(*args, **kwargs)
        SEEN.append(found.st_size)
        return found


def test_subclass():
    assert a.used(1) == 2
    assert Kept(a.__file__).is_file()
    assert SEEN in ([], [SIZE])
"""


def is_file_calls_stat() -> bool:
    """Whether this Python's ``Path.is_file`` calls the path's own ``stat`` (3.13's calls
    ``os.path.isfile``): only then does the subclass see the size."""
    called = []

    class Probe(type(pathlib.Path())):  # type: ignore[misc]
        def stat(self, *args, **kwargs):
            called.append(True)
            return super().stat(*args, **kwargs)

    Probe(__file__).is_file()
    return bool(called)


def test_a_file_only_probed_is_held_by_its_code_and_one_seen_stays_whole(tmp_path):
    size = len(PKG_A.encode())
    proj = write_tree(
        tmp_path / "p",
        {
            "pytest.ini": "[pytest]\n",
            "pkg/__init__.py": "",
            "pkg/a.py": PKG_A,
            "tests/test_probe.py": PROBES,
            "tests/test_own.py": OWN.format(size=size),
            "tests/test_subclass.py": SUBCLASS.format(size=size),
        },
    )
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    code, out, st = build_statuses(proj, "-v", "--pytest", env=env)
    assert code == 0 and set(st.values()) == {"passed"}, out
    (Path(proj) / "pkg/a.py").write_text(EDITED)  # a function no run executed
    code, out, st = build_statuses(proj, "-v", "--pytest", env=env)
    assert st["pytest:tests/test_probe.py"] == "cached", out
    assert st["pytest:tests/test_own.py"] == "failed", out  # ran again: the size changed
    seen = "failed" if is_file_calls_stat() else "cached"
    assert st["pytest:tests/test_subclass.py"] == seen, out
