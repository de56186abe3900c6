"""Module-level calls (``memotest/worker/call_lines.py``): a call of a module body runs
code while the module's frame is at the call's line, and a callee can read that line
(``sys._getframe(1).f_lineno``, ``inspect``, ``traceback``, a warning's ``stacklevel``,
logging's ``%(lineno)d``), directly, through a function it calls, or from Python code a C
function calls back (``map``, ``sorted``'s key, ``int``'s ``__int__``, a ``str`` subclass's
``split``, a module's ``__getattr__``, a name shadowing a builtin). Red team first: each
module below has one such call on the line after ``#HERE``; a line added there must
re-run the test that saw it. Then the narrowing they guard: a call of C functions on
built-in values (a version string parsed into a tuple) reads no frame."""

from __future__ import annotations

from pathlib import Path

from conftest import BuildStatuses, build_statuses, needs_code_noting, write_tree

READERS = """
import inspect
import logging
import sys
import traceback
import warnings

LINES = []


def getframe(*args):
    LINES.append(sys._getframe(1).f_lineno)
    return 1


def currentframe():
    LINES.append(inspect.currentframe().f_back.f_lineno)


def stack():
    LINES.append(inspect.stack(context=0)[1].lineno)


def extract():
    LINES.append(traceback.extract_stack(limit=2)[0].lineno)


def warn():
    warnings.warn("seen", stacklevel=2)


def inner():
    LINES.append(sys._getframe(2).f_lineno)


def outer():
    inner()


class Keep(logging.Handler):
    def emit(self, record):
        LINES.append(record.lineno)


LOG = logging.getLogger("pkg.readers")
LOG.addHandler(Keep())
LOG.propagate = False


class Num:
    def __int__(self):
        LINES.append(sys._getframe(1).f_lineno)
        return 1


NUMS = [Num()]


class Version(str):
    def split(self, *args):
        LINES.append(sys._getframe(1).f_lineno)
        return str.split(self, *args)


VERSION = Version("1.2")
PLAIN = "1.2"
"""

LAZY = """
import sys

LINES = []


def __getattr__(name):
    if name != "VERSION":
        raise AttributeError(name)
    LINES.append(sys._getframe(1).f_lineno)
    return "1.2"
"""

#: module name -> (its text: the call on the line after ``#HERE``, line 2 before the
#: edit; what the test expects ``LINES`` to hold)
MODULES = {
    "getframe": ("from pkg.readers import getframe\n#HERE\ngetframe()\n", "[2]"),
    "currentframe": ("from pkg.readers import currentframe\n#HERE\ncurrentframe()\n", "[2]"),
    "stack": ("from pkg.readers import stack\n#HERE\nstack()\n", "[2]"),
    "extract": ("from pkg.readers import extract\n#HERE\nextract()\n", "[2]"),
    "warn": ("from pkg.readers import warn\n#HERE\nwarn()\n", "WARNED"),
    "logging": ("from pkg.readers import LOG\n#HERE\nLOG.warning('seen')\n", "[2]"),
    # A callee's callee reads it.
    "indirect": ("from pkg.readers import outer\n#HERE\nouter()\n", "[2]"),
    # C functions calling back into Python code, which sees the module's frame.
    "map": ("from pkg.readers import getframe\n#HERE\nX = list(map(getframe, [0]))\n", "[2]"),
    "sorted": (
        "from pkg.readers import getframe\n#HERE\nX = sorted([0, 1], key=getframe)\n",
        "[2, 2]",
    ),
    # A generator expression of the module's own, run by tuple(): its frame is at the line.
    "genexpr": (
        "from pkg.readers import getframe\n#HERE\n"
        "X = tuple(getframe(v) for v in '1.2'.split('.'))\n",
        "[2, 2]",
    ),
    # int() of a value with a Python __int__.
    "int_hook": ("from pkg.readers import NUMS\n#HERE\nX = tuple(int(v) for v in NUMS)\n", "[2]"),
    # A str subclass whose split is Python code.
    "str_subclass": (
        "from pkg import readers\n#HERE\nX = tuple(int(v) for v in readers.VERSION.split('.'))\n",
        "[2]",
    ),
    # A module attribute got by the module's __getattr__.
    "module_getattr": (
        "from pkg import lazy\n#HERE\nX = tuple(int(v) for v in lazy.VERSION.split('.'))\n",
        "LAZY",
    ),
    # Builtins' names bound by the module to Python functions.
    "shadow_int": (
        "from pkg.readers import getframe as int\n#HERE\n"
        "X = tuple(int(v) for v in '1.2'.split('.'))\n",
        "[2, 2]",
    ),
    "shadow_tuple": (
        "from pkg.readers import getframe as tuple\n#HERE\n"
        "X = tuple(v for v in '1.2'.split('.'))\n",
        "[2]",
    ),
}

WARNED = """
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pkg.warn
    assert [w.lineno for w in caught] == [2]
"""


def statuses(proj: Path) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code in (0, 1), out
    short = {name.rsplit("/", 1)[-1][len("test_") : -len(".py")]: s for name, s in st.items()}
    return BuildStatuses(out, short)


def project(tmp_path: Path, modules: dict[str, tuple[str, str]]) -> Path:
    files = {
        "pytest.ini": "[pytest]\n",
        "pkg/__init__.py": "",
        "pkg/readers.py": READERS,
        "pkg/lazy.py": LAZY,
    }
    for name, (module, check) in modules.items():
        files[f"pkg/{name}.py"] = module.replace("#HERE\n", "")
        if check == "WARNED":
            files[f"tests/test_{name}.py"] = "def test_it():" + WARNED
        else:
            seen = "lazy" if check == "LAZY" else "readers"
            want = "[2]" if check == "LAZY" else check
            files[f"tests/test_{name}.py"] = (
                f"from pkg import {seen}\nimport pkg.{name}\n\n"
                f"def test_it():\n    assert {seen}.LINES == {want}\n"
            )
    return write_tree(tmp_path / "proj", files)


def test_a_line_added_above_a_call_whose_callee_reads_the_line_re_runs_it(tmp_path):
    proj = project(tmp_path, MODULES)
    assert statuses(proj) == dict.fromkeys(MODULES, "passed")
    for name, (module, _check) in MODULES.items():
        (proj / "pkg" / f"{name}.py").write_text(module.replace("#HERE\n", "# one more\n"))
    assert statuses(proj) == dict.fromkeys(MODULES, "failed")


#: The narrowing guarded above: statements whose calls are C functions on built-in values.
NARROWED = """
import os
from pkg import readers

#HERE
VERSION = tuple(int(v) for v in readers.PLAIN.split("."))
NAME = "-".join(part.strip() for part in "a, b".split(","))
SIZES = [1, 2]
"""


@needs_code_noting
def test_a_line_added_above_a_call_of_c_functions_on_built_in_values_re_runs_nothing(tmp_path):
    proj = project(tmp_path, {})
    write_tree(
        proj,
        {
            "pkg/narrowed.py": NARROWED.replace("#HERE\n", ""),
            "tests/test_narrowed.py": (
                "from pkg import narrowed\n\ndef test_it():\n"
                "    assert narrowed.VERSION == (1, 2) and narrowed.NAME == 'a-b'\n"
            ),
        },
    )
    assert statuses(proj) == {"narrowed": "passed"}
    (proj / "pkg" / "narrowed.py").write_text(NARROWED.replace("#HERE\n", "# one more\n"))
    assert statuses(proj) == {"narrowed": "cached"}
    # The value parsed still counts: it is a constant of the module's body.
    path = proj / "pkg" / "narrowed.py"
    path.write_text(path.read_text().replace('"a, b"', '"a, c"'))
    assert statuses(proj) == {"narrowed": "failed"}
