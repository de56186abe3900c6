"""A ``def`` statement's default values (``memotest/worker/codes.py``, ``code_watch.py``):
held only for the functions whose defaults a run could have seen. Red team first: each
test file below sees a default of a function of ``pkg`` through one reader, without that
function being the test's own; an edit of that value alone must re-run it. Then the
narrowing they guard: the defaults of a function that did not run and that nothing read
are no input."""

from __future__ import annotations

from pathlib import Path

from conftest import BuildStatuses, build_statuses, write_tree

LIBRARY = """
import sys


def h(x, y=2, *, z=3):
    return x + y + z
"""

#: name -> the test's check (of y=2 or z=3), the edit (old, new)
READERS = {
    # inspect.signature reads __defaults__ (and __code__); pytest's fixture introspection
    # and help() go through it.
    "signature": ("assert inspect.signature(a.h).parameters['y'].default == 2", "y=2", "y=5"),
    "help": (
        "import io, contextlib\n    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n        help(a.h)\n"
        "    assert 'z=3' in out.getvalue()",
        "z=3",
        "z=6",
    ),
    "defaults": ("assert a.h.__defaults__ == (2,)", "y=2", "y=5"),
    "kwdefaults": ("assert a.h.__kwdefaults__ == {'z': 3}", "z=3", "z=6"),
    # A call that binds the default: the function runs.
    "called": ("assert a.h(1) == 6", "y=2", "y=5"),
    # The garbage collector hands out what a function refers to.
    "referents": ("import gc\n    assert (2,) in gc.get_referents(a.h)", "y=2", "y=5"),
    # The module's own code object, read from its frame while it runs.
    "frame": ("assert (2,) in a.CONSTS", "y=2", "y=5"),
    # A decorator reads them as the function is made.
    "decorator": ("assert a.SEEN == [(2,)]", "y=2", "y=5"),
}

MODULES = {
    "frame": LIBRARY + "\nCONSTS = sys._getframe().f_code.co_consts\n",
    "decorator": LIBRARY.replace(
        "def h(",
        "SEEN = []\n\n\ndef seen(f):\n    SEEN.append(f.__defaults__)\n    return f\n\n\n"
        "@seen\ndef h(",
    ),
}


def statuses(proj: Path) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code in (0, 1), out
    short = {name.rsplit("/", 1)[-1][len("test_") : -len(".py")]: s for name, s in st.items()}
    return BuildStatuses(out, short)


def test_a_default_edited_re_runs_every_reader_of_it(tmp_path):
    files = {"pytest.ini": "[pytest]\n", "pkg/__init__.py": ""}
    for name, (check, _old, _new) in READERS.items():
        files[f"pkg/{name}.py"] = MODULES.get(name, LIBRARY)
        files[f"tests/test_{name}.py"] = (
            f"import inspect\nimport pkg.{name} as a\n\ndef test_it():\n    {check}\n"
        )
    proj = write_tree(tmp_path / "proj", files)
    assert statuses(proj) == dict.fromkeys(READERS, "passed")
    for name, (_check, old, new) in READERS.items():
        path = proj / "pkg" / f"{name}.py"
        assert old in path.read_text(), name
        path.write_text(path.read_text().replace(old, new, 1))
    assert statuses(proj) == dict.fromkeys(READERS, "failed")


NARROWED = """
def used(x):
    return x + 1


def unused(x, y=2, *, z=3):
    return x + y + z


def other(x, y=(1, 2)):
    return x
"""


def test_a_default_nothing_read_re_runs_nothing(tmp_path):
    """The narrowing guarded above: the values of a function's defaults, when it did not
    run and nothing read them; their number and names still count (a call that does
    not bind raises before the function runs)."""
    files = {
        "pytest.ini": "[pytest]\n",
        "pkg/__init__.py": "",
        "pkg/a.py": NARROWED,
        "tests/test_a.py": "from pkg import a\n\ndef test_a():\n    assert a.used(1) == 2\n",
        "tests/test_b.py": (
            "import pytest\nfrom pkg import a\n\ndef test_b():\n"
            "    with pytest.raises(TypeError, match='missing'):\n        a.unused()\n"
        ),
    }
    proj = write_tree(tmp_path / "proj", files)
    assert statuses(proj) == {"a": "passed", "b": "passed"}
    path = proj / "pkg" / "a.py"
    path.write_text(
        path.read_text().replace("y=2", "y=5").replace("z=3", "z=None").replace("(1, 2)", "'x'")
    )
    assert statuses(proj) == {"a": "cached", "b": "cached"}
    # One default more: a call binds differently (test_b now passes through the call).
    path.write_text(path.read_text().replace("def unused(x,", "def unused(x=0,"))
    assert statuses(proj) == {"a": "passed", "b": "failed"}
