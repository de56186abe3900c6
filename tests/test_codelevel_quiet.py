"""Red team for the instructions of a module body counted as quiet
(``memotest/worker/codes.py``, ``_QUIET``): an instruction during which code could read the
module frame's line must keep its line in the digest. Each module below has code run (or
C code read the frame) at a line that is otherwise made of names and constants; a line
added right above it, and nowhere above any loud line, must re-run the test that saw it."""

from __future__ import annotations

from pathlib import Path

from conftest import BuildStatuses, build_statuses, write_tree

READERS = """
import sys


class Key:
    line = None

    def __hash__(self):
        Key.line = sys._getframe(1).f_lineno
        return 1


class Twin:
    lines = []

    def __hash__(self):
        return 1

    def __eq__(self, other):
        Twin.lines.append(sys._getframe(1).f_lineno)
        return self is other


class Dies:
    line = None

    def __del__(self):
        Dies.line = sys._getframe(1).f_lineno
"""

#: module name -> (its text, with ``#HERE`` where the line is added; the test's check of
#: the line it saw before the edit)
MODULES = {
    # A dict display with a key of a user class: __hash__ runs at the display's line.
    "dict_hash": (
        "from pkg.readers import Key\nk = Key()\n#HERE\nD = {k: 1}\n",
        "assert Key.line == 3",
    ),
    # The same in a class body made by type (whose own lines count only where code runs).
    "class_dict_hash": (
        "from pkg.readers import Key\nk = Key()\nclass C:\n    #HERE\n    D = {k: 1}\n",
        "assert Key.line == 4",
    ),
    # Two keys whose hashes collide: __eq__ runs there.
    "dict_eq": (
        "from pkg.readers import Twin\na, b = Twin(), Twin()\n#HERE\nD = {a: 1, b: 2}\n",
        "assert Twin.lines == [3]",
    ),
    # A set display hashes its items too.
    "set_hash": (
        "from pkg.readers import Key\nk = Key()\n#HERE\nS = {k}\n",
        "assert Key.line == 3",
    ),
    # A name bound again drops the last reference to its old value: __del__ runs at the
    # line of the new binding.
    "rebind_del": (
        "from pkg.readers import Dies\nx = Dies()\ny = 2\n#HERE\nx = None\n",
        "assert Dies.line == 4",
    ),
    # The same in C code alone: a file dropped unclosed warns (ResourceWarning) with the
    # line of the frame that runs, the module's.
    "rebind_warning": (
        "import os\nf = open(os.devnull)\ny = 2\n#HERE\nf = None\n",
        "WARNED",
    ),
}

WARNED = """
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pkg.rebind_warning
    assert [w.lineno for w in caught if w.category is ResourceWarning] == [4]
"""


def statuses(proj: Path) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code in (0, 1), out
    short = {name.rsplit("/", 1)[-1][len("test_") : -len(".py")]: s for name, s in st.items()}
    return BuildStatuses(out, short)


def test_a_line_added_above_code_run_by_a_quiet_looking_line_re_runs_its_reader(tmp_path):
    files = {"pytest.ini": "[pytest]\n", "pkg/__init__.py": "", "pkg/readers.py": READERS}
    for name, (module, check) in MODULES.items():
        files[f"pkg/{name}.py"] = module.replace("#HERE\n", "").replace("    \n", "")
        if check == "WARNED":
            files[f"tests/test_{name}.py"] = "def test_it():" + WARNED
        else:
            cls = check.split()[1].split(".")[0]
            files[f"tests/test_{name}.py"] = (
                f"import pkg.{name}\nfrom pkg.readers import {cls}\n\ndef test_it():\n    {check}\n"
            )
    proj = write_tree(tmp_path / "proj", files)
    assert statuses(proj) == dict.fromkeys(MODULES, "passed")
    for name, (module, _check) in MODULES.items():
        (proj / "pkg" / f"{name}.py").write_text(module.replace("#HERE\n", "# one more\n"))
    assert statuses(proj) == dict.fromkeys(MODULES, "failed")
