"""Red team for the module-level statements a run can observe without running a function
(``memotest/worker/codes.py``): the line of a class statement, and the docstring and
signature of a ``def``. Each test file below depends on one of them through one reader;
an edit that changes only that thing must re-run it. Whatever narrowing the digests get,
these must keep failing on the second build."""

from __future__ import annotations

from pathlib import Path

from conftest import BuildStatuses, build_statuses, needs_code_noting, write_tree

#: Modules whose class statement's line some code reads while the class is made, each
#: read by ``tests/test_<module>.py``, which asserts the line it saw (3).
CLASS_LINE_READERS = {
    # A base class's __init_subclass__, defined in another module.
    "init_subclass": (
        "from pkg.readers import Base\n\nclass Sub(Base):\n    pass\n",
        "assert m.Sub.line == 3",
    ),
    # A metaclass.
    "metaclass": (
        "from pkg.readers import Meta\n\nclass Sub(metaclass=Meta):\n    pass\n",
        "assert m.Sub.line == 3",
    ),
    # A metaclass of the same module: its own statement is made by type alone (quiet),
    # the statement it makes a class of runs its __new__ (held).
    "own_metaclass": (
        "import sys\nclass Meta(type):\n    def __new__(mcls, name, bases, ns):\n"
        "        cls = type.__new__(mcls, name, bases, ns)\n"
        "        cls.line = sys._getframe(1).f_lineno\n        return cls\n"
        "class Sub(metaclass=Meta):\n    pass\n",
        "assert m.Sub.line == 7",
    ),
    # __set_name__ of a descriptor made outside the class body (no call in the body).
    "set_name": (
        "from pkg.readers import Named\nd = Named()\nclass Sub:\n    x = d\n",
        "assert m.Sub.x.line == 3",
    ),
    # __mro_entries__ of a base that is not a class.
    "mro_entries": (
        "from pkg.readers import entry, Holder\n\nclass Sub(entry):\n    pass\n",
        "assert m.Holder.line == 3",
    ),
    # A call in the class body that reads the module's frame (two up).
    "body_call": (
        "from pkg.readers import caller_line\n\nclass Sub:\n    line = caller_line()\n",
        "assert m.Sub.line == 3",
    ),
    # A class decorator.
    "decorator": (
        "from pkg.readers import mark\n\n@mark\nclass Sub:\n    pass\n",
        "assert m.Sub.line == 3",
    ),
    # A warning from __init_subclass__ (stacklevel=2: the class statement's line, read by
    # the warnings machinery in C).
    "warning": (
        "from pkg.readers import Warns\n\nclass Sub(Warns):\n    pass\n",
        "WARNED",
    ),
}

READERS = """
import sys
import warnings


class Base:
    def __init_subclass__(cls, **kw):
        cls.line = sys._getframe(1).f_lineno


class Meta(type):
    def __new__(mcls, name, bases, ns):
        cls = super().__new__(mcls, name, bases, ns)
        cls.line = sys._getframe(1).f_lineno
        return cls


class Named:
    def __set_name__(self, owner, name):
        self.line = sys._getframe(1).f_lineno


class Holder:
    line = None


class Entry:
    def __mro_entries__(self, bases):
        Holder.line = sys._getframe(1).f_lineno
        return (object,)


entry = Entry()


def caller_line():
    return sys._getframe(2).f_lineno


def mark(cls):
    cls.line = sys._getframe(1).f_lineno
    return cls


class Warns:
    def __init_subclass__(cls, **kw):
        warnings.warn("subclassed", UserWarning, stacklevel=2)
"""

WARNED = """
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pkg.warning
    assert [w.lineno for w in caught] == [3]
"""


def reader_files(readers: dict[str, tuple[str, str]]) -> dict[str, str]:
    files = {"pytest.ini": "[pytest]\n", "pkg/__init__.py": "", "pkg/readers.py": READERS}
    for name, (module, check) in readers.items():
        files[f"pkg/{name}.py"] = module
        if check == "WARNED":
            files[f"tests/test_{name}.py"] = "def test_it():" + WARNED
        else:
            files[f"tests/test_{name}.py"] = (
                f"import pkg.{name} as m\n\ndef test_it():\n    {check}\n"
            )
    return files


def statuses(proj: Path) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code in (0, 1), out
    short = {name.rsplit("/", 1)[-1][len("test_") : -len(".py")]: s for name, s in st.items()}
    return BuildStatuses(out, short)


#: The same, imported by the root conftest: their module bodies run in the worker, which
#: configured pytest with it, and their class statements are read there, once
#: (``code_watch.quiet_prepared``), not in each run.
PREPARED_READERS = {
    f"prepared_{name}": CLASS_LINE_READERS[name]
    for name in ("init_subclass", "metaclass", "set_name", "body_call")
}


@needs_code_noting
def test_a_line_added_above_a_class_re_runs_every_reader_of_its_line(tmp_path):
    readers = {**CLASS_LINE_READERS, **PREPARED_READERS}
    files = reader_files(readers)
    files["conftest.py"] = "".join(f"import pkg.{name}\n" for name in PREPARED_READERS)
    proj = write_tree(tmp_path / "proj", files)
    assert set(statuses(proj).values()) == {"passed"}
    # The modules the preparation ran apart: an edit of one re-runs every target, which
    # would hide the others' false skips.
    for part, others in ((CLASS_LINE_READERS, "cached"), (PREPARED_READERS, "failed")):
        for name in part:  # a line right above the (last) class statement
            path = proj / "pkg" / f"{name}.py"
            lines = path.read_text().splitlines(keepends=True)
            at = max(n for n, line in enumerate(lines) if line.startswith("class "))
            while at and lines[at - 1].startswith("@"):  # above its decorators
                at -= 1
            path.write_text("".join([*lines[:at], "# one line more\n", *lines[at:]]))
        want = {name: "failed" if name in part else others for name in readers}
        assert statuses(proj) == want


#: Readers of a function's docstring or signature that never run the function.
DEF_READERS = {
    # inspect.getdoc reads __doc__ (no audit event, no __code__).
    "getdoc": ("assert inspect.getdoc(a.f) == 'Adds one.'", '"""Adds one."""', '"""Adds 1."""'),
    # help() prints the docstring.
    "help": (
        "import io, contextlib\n    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n        help(a.f)\n"
        "    assert 'Adds one.' in out.getvalue()",
        '"""Adds one."""',
        '"""Adds 1."""',
    ),
    # A doctest in the docstring.
    "doctest": (
        "import doctest\n    r = doctest.run_docstring_examples(a.g, {'g': a.g})\n"
        "    assert doctest.testmod(a).failed == 0",
        ">>> 1 + 1\n    2",
        ">>> 1 + 1\n    3",
    ),
    # The docstring of a context manager's function, copied by functools.wraps.
    "wraps": ("assert a.cm.__doc__ == 'Opens.'", '"""Opens."""', '"""Opens it."""'),
    # A call whose keyword does not bind: the function never runs.
    "binding": (
        "import pytest\n    with pytest.raises(TypeError):\n        a.h(x=1, z=2)",
        "def h(x, y=2):",
        "def h(x, z=2):",
    ),
    # The docstring copied by property, in C.
    "property": ("assert property(a.f).__doc__ == 'Adds one.'", '"""Adds one."""', '"""Adds 1."""'),
    # Annotations read as they are: no audit event.
    "annotations": ("assert a.k.__annotations__ == {'x': int}", "def k(x: int):", "def k(x: str):"),
    # Annotations, read by typing.
    "hints": (
        "import typing\n    assert typing.get_type_hints(a.k) == {'x': int}",
        "def k(x: int):",
        "def k(x: str):",
    ),
}

DEFS = '''
import contextlib


def f(x):
    """Adds one."""
    return x + 1


def g():
    """
    >>> 1 + 1
    2
    """


@contextlib.contextmanager
def cm():
    """Opens."""
    yield


def h(x, y=2):
    return x + y


def k(x: int):
    return x
'''


def test_a_def_edited_re_runs_every_reader_that_never_ran_it(tmp_path):
    files = {"pytest.ini": "[pytest]\n", "pkg/__init__.py": ""}
    for name, (check, _old, _new) in DEF_READERS.items():
        files[f"pkg/{name}.py"] = DEFS
        files[f"tests/test_{name}.py"] = (
            f"import inspect\nimport pkg.{name} as a\n\ndef test_it():\n    {check}\n"
        )
    proj = write_tree(tmp_path / "proj", files)
    assert set(statuses(proj).values()) == {"passed"}
    for name, (_check, old, new) in DEF_READERS.items():
        path = proj / "pkg" / f"{name}.py"
        text = path.read_text()
        assert old in text, name
        path.write_text(text.replace(old, new, 1))
    assert statuses(proj) == dict.fromkeys(DEF_READERS, "failed")


PLAIN = '''import abc
from pkg import base


def used(x):
    return x + 1


class Meta(type):
    """A metaclass: made by type, from its base type, as a plain class is."""

    def __call__(cls, *args, **kwargs):
        return type.__call__(cls, *args, **kwargs)


class Plain(base.Base, metaclass=abc.ABCMeta):
    """Made by type and abc alone: no Python code of the project runs as it is made."""

    names = ["a", "b", "c"]

    def __init__(self, x=1):
        self.x = x

    @property
    def value(self):
        return self.x

    @value.setter
    def value(self, v):
        self.x = v

    @abc.abstractmethod
    def go(self):
        pass

    @staticmethod
    def helper():
        return 1
'''


@needs_code_noting
def test_a_line_added_above_a_plain_class_re_runs_nothing(tmp_path):
    """The narrowing the red team above guards: a class made by ``type`` or
    ``abc.ABCMeta`` whose body only binds names, functions and what ``property``,
    ``staticmethod``, ``classmethod`` and ``abc.abstractmethod`` make of them; a
    metaclass whose base is ``type`` too (``own_metaclass`` there)."""
    files = {
        "pytest.ini": "[pytest]\n",
        "pkg/__init__.py": "",
        "pkg/base.py": "class Base:\n    pass\n",
        "pkg/a.py": PLAIN,
        "tests/test_a.py": "from pkg import a\n\ndef test_a():\n    assert a.used(1) == 2\n",
        "tests/test_b.py": "import pkg.a\n\ndef test_b():\n    assert pkg.a.Plain\n",
        # inspect finds a class's lines by its __firstlineno__ on Python 3.13 (a constant
        # of the body there, left out of the vouched body's digest), by parsing the file
        # before: either way it reads the source, which holds it.
        "tests/test_c.py": "import inspect, pkg.a\n\ndef test_c():\n"
        "    assert inspect.getsourcelines(pkg.a.Plain)[1] == 16\n",
    }
    proj = write_tree(tmp_path / "proj", files)
    assert statuses(proj) == {"a": "passed", "b": "passed", "c": "passed"}
    path = proj / "pkg" / "a.py"
    path.write_text(path.read_text().replace("\nclass Meta", "\n# a note\nclass Meta", 1))
    assert statuses(proj) == {"a": "cached", "b": "cached", "c": "failed"}
    # A call in its body is Python code that could read the module's frame: held again.
    path.write_text(path.read_text().replace('["a", "b", "c"]', 'list("abc")', 1))
    assert statuses(proj) == {"a": "passed", "b": "passed", "c": "failed"}
    path.write_text(path.read_text().replace("\nclass Plain", "\n# another\nclass Plain", 1))
    assert statuses(proj) == {"a": "passed", "b": "passed", "c": "failed"}


def test_a_class_bodys_first_line_is_left_out_only_where_nothing_shares_it():
    """The digest of a vouched class body leaves its first line out (a constant since
    Python 3.13: ``__firstlineno__``) only when no other instruction loads that constant:
    a value equal to the line, edited with a line added above, still counts."""
    from memotest.worker import codes

    def body(source: str):
        module = compile(source, "m.py", "exec")
        return next(c for c in module.co_consts if hasattr(c, "co_code"))

    def digest(source: str) -> str:
        return codes.digest(body(source), False, [])

    plain = "class A:\n    y = 7\n"
    assert digest(plain) == digest("# a note\n" + plain)
    # the class on line 2 and ``y = 2`` share the constant 2 (when Python stores the first
    # line): ``y`` edited to 3 with a line added above must not look unchanged
    before = "\nclass A:\n    y = 2\n"
    after = "\n\nclass A:\n    y = 3\n"
    assert digest(before) != digest(after)
    assert digest("class A:\n    y = 7\n") != digest("class A:\n    y = 8\n")
