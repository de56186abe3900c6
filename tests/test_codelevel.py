"""Python files fingerprinted by the code of them a run executed (``memotest/inputs/code.py``,
``memotest/worker/code_watch.py``): real pytest builds forked from a warm worker, real
edits, and the cases that must fall back to the whole file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, needs_code_noting, write_tree

from memotest.inputs import code as code_kind
from memotest.model import Kind
from memotest.store import Store
from memotest.worker import codes

A = "pytest:tests/test_a.py"
B = "pytest:tests/test_b.py"

PKG_A = '''
LIMIT = 3


def used(x):
    return x + 1


def unused(x, y=2):
    """Adds."""
    return x + y
'''


def project(tmp_path: Path, test_a: str, extra: dict[str, str] | None = None) -> Path:
    """``pkg/a.py`` (``used``, ``unused``) imported by both test files through
    ``pkg/__init__.py``; ``tests/test_b.py`` runs none of it."""
    return write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "pkg/__init__.py": "from pkg import a\n",
            "pkg/a.py": PKG_A,
            "tests/test_a.py": test_a,
            "tests/test_b.py": "import pkg\n\ndef test_b():\n    assert pkg\n",
            **(extra or {}),
        },
    )


USES = "from pkg import a\n\ndef test_a():\n    assert a.used(1) == 2\n"


def edit(proj: Path, old: str, new: str, rel: str = "pkg/a.py") -> None:
    path = proj / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def kinds(proj: Path, rel: str = "pkg/a.py") -> set[str]:
    """The kinds of the inputs the test files' records have for a file of the project
    (the collection's record only stat'ed it, whole)."""
    path = str(proj / rel)
    with Store.open(proj, lock=False) as store:
        records = store.records([A, B]).values()
        return {Kind(i.kind).value for r in records for i in r.inputs if i.path == path}


def built(proj: Path, *args: str) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v", *args)
    assert code in (0, 1), out
    return st


#: dis (numba, inspect.signature) reads a function's ``__code__`` without calling it.
DIS = """
from pkg import a
import dis


def test_dis():
    ops = [i.argrepr for i in dis.get_instructions(a.unused) if i.opname == "BINARY_OP"]
    assert ops == ["+"]
"""
D = "pytest:tests/test_dis.py"


@needs_code_noting
def test_an_edit_to_code_no_run_executed_leaves_every_run_cached(tmp_path):
    """An edit to code no run executed replays every run; bytecode read without running
    it (``tests/test_dis.py``) counts as run; lines moved above an executed function run
    it again (a traceback or a log shows its lines); an edit to its body runs only the
    file that ran it."""
    proj = project(tmp_path, USES, {"tests/test_dis.py": DIS})
    assert built(proj) == {A: "passed", B: "passed", D: "passed"}
    assert kinds(proj) == {"code"}
    edit(proj, "return x + y", "return x * y")  # unused's body: only test_dis read it
    edit(proj, "LIMIT = 3\n", "LIMIT = 3  # a comment\n")
    explain = memotest("explain", D, cwd=proj).stdout.decode()
    assert "unused changed" in explain, explain
    assert built(proj) == {A: "cached", B: "cached", D: "failed"}
    edit(proj, "LIMIT = 3  # a comment\n", "LIMIT = 3  # a comment\n\n\n")
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "used changed" in explain, explain
    assert built(proj) == {A: "passed", B: "cached", D: "failed"}
    edit(proj, "return x + 1", "return x + 2")  # used's body: only test_a ran it
    explain = memotest("explain", A, B, cwd=proj).stdout.decode()
    assert "pkg/a.py: used changed" in explain, explain
    assert f"{B}: up to date" in explain, explain
    assert built(proj) == {A: "failed", B: "cached", D: "failed"}


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="Python 3.10, which notes no code")
def test_without_code_noting_every_importer_runs_again(tmp_path):
    """Python 3.10: nothing notes the code, so a file is held whole and an edit to a
    function no run executed still runs every file that imported it."""
    proj = project(tmp_path, USES)
    assert built(proj) == {A: "passed", B: "passed"}
    assert kinds(proj) == {"file"}
    edit(proj, "return x + y", "return x * y")  # unused's body
    assert built(proj) == {A: "passed", B: "passed"}


#: One module per edit of what a run sees without running it, each a copy of ``pkg/a.py``
#: imported (nothing of it called) by its own test file: one build checks each edit alone.
SEEN = {
    "args": ("def unused(x, y=2):", "def unused(x, z=2):"),  # an argument's name
    "doc": ('"""Adds."""', '"""Adds two."""'),  # a docstring
    "value": ("LIMIT = 3", "LIMIT = 4"),  # a module-level value
    "new": ("\ndef unused", "\ndef another():\n    pass\n\n\ndef unused"),  # a function
}
SIGNATURE = """
import inspect
from pkg import args


def test_signature():
    assert list(inspect.signature(args.unused).parameters) == ["x", "y"]
"""


def test_what_is_seen_without_running_counts(tmp_path):
    """A run depends on every name, signature, docstring and module-level value of a file
    it imported, whether or not it called the function (a run that reads the signature
    fails by the argument's new name); not on the value of a default that nothing read
    (``tests/test_codelevel_defaults.py``). On Python 3.10, which notes no code, the file
    is held whole and the default's edit runs every importer again too. A test file and
    a conftest stay whole: an edit to a comment of the conftest runs every file again."""
    seen = {f"pkg/{m}.py": PKG_A for m in SEEN}
    for m in SEEN:
        seen[f"tests/test_{m}.py"] = f"from pkg import {m}\n\ndef test_{m}():\n    assert {m}\n"
    conftest = {"tests/conftest.py": "X = 1\n"}
    proj = project(tmp_path, USES, {**seen, **conftest, "tests/test_signature.py": SIGNATURE})
    sig = "pytest:tests/test_signature.py"
    each = {m: f"pytest:tests/test_{m}.py" for m in SEEN}
    assert built(proj) == dict.fromkeys([A, B, sig, *each.values()], "passed")
    # pytest shows the lines of what it collects, and rewrites them: held whole.
    assert kinds(proj, "tests/test_a.py") == {"file"}
    assert kinds(proj, "tests/conftest.py") == {"file"}
    edit(proj, "def unused(x, y=2):", "def unused(x, y=3):")
    unread = "cached" if sys.version_info >= (3, 11) else "passed"
    # (The runs that imported a copy of pkg/a.py re-run: not asserted either way.)
    assert {t: s for t, s in built(proj).items() if t in (A, B, sig)} == {
        A: unread,
        B: unread,
        sig: unread,
    }
    for m, (old, new) in SEEN.items():
        edit(proj, old, new, f"pkg/{m}.py")
    each_passed = dict.fromkeys(each.values(), "passed")
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code == 1 and st == {
        A: "cached",
        B: "cached",
        sig: "failed",
        **each_passed,
    }, out
    for m, target in each.items():  # each by its own module's edit
        line = next(line for line in out.splitlines() if target in line)
        assert f"pkg/{m}.py" in line, out
    edit(proj, "X = 1\n", "X = 1  # a comment\n", "tests/conftest.py")
    assert built(proj) == {A: "passed", B: "passed", sig: "failed", **each_passed}


# A stand-in for Hypothesis's engine, and a test that runs it as a @given test would.
ENGINE = {
    "vendor/hypothesis/internal/conjecture/engine.py": (
        "class ConjectureRunner:\n    def run(self):\n        return 1\n"
    )
}
HYPOTHESIS = (
    "import importlib.util\nimport pkg\n\n"
    "path = 'vendor/hypothesis/internal/conjecture/engine.py'\n"
    "spec = importlib.util.spec_from_file_location('engine', path)\n"
    "engine = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(engine)\n\n"
    "def test_a():\n    assert engine.ConjectureRunner().run()\n"
)


#: One test file per way the code a run executed cannot be told: each its own target.
CANNOT_TELL = {
    "tests/test_source.py": (  # its source was read
        "import inspect\nfrom pkg import a\n\n"
        "def test_a():\n    assert 'return' in inspect.getsource(a.used)\n"
    ),
    "tests/test_subprocess.py": (  # a subprocess imported it
        "import subprocess, sys\n\n"
        "def test_a():\n"
        "    subprocess.run([sys.executable, '-c', 'import pkg.a'], check=True)\n"
    ),
    "tests/test_fork.py": (  # the run forked
        "import os\nimport pkg\n\n"
        "def test_a():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
    ),
    "tests/test_hypothesis.py": HYPOTHESIS,  # the run used hypothesis
}


@needs_code_noting
def test_whole_files_when_the_code_run_cannot_be_told(tmp_path):
    """Each such file holds ``pkg/a.py`` whole, not the others (``test_a`` and ``test_b``
    replay); a file that ran hypothesis is not noted again (its files stay whole anyway:
    its next runs skip the cost of noting their code)."""
    proj = project(tmp_path, USES, {**ENGINE, **CANNOT_TELL})
    whole = dict.fromkeys((f"pytest:{rel}" for rel in CANNOT_TELL), "passed")
    _, out, st = build_statuses(proj, "--pytest", "-v")
    assert st == {A: "passed", B: "passed", **whole}, out
    if "ran in a fresh process" in out or "started fresh" in out:
        # Not what is tested here: a worker that could not be used (its reason is in
        # the output) runs its targets as fresh processes, which report no code.
        pytest.skip(f"the build fell back to fresh processes:\n{out}")
    hints = json.loads((proj / ".memotest" / "warm.json").read_text())
    unnoted = [a for entry in hints["interpreters"].values() for a in entry["whole"]]
    assert any("tests/test_hypothesis.py" in a for a in unnoted), (unnoted, out)
    assert not any("tests/test_a.py" in a or "tests/test_b.py" in a for a in unnoted), unnoted
    edit(proj, "return x + y", "return x * y")  # code no run executed
    _, out, st = build_statuses(proj, "--pytest", "-v")
    assert st == {A: "cached", B: "cached", **whole}, out


def test_whole_files_option_and_fresh_runs(tmp_path):
    proj = project(tmp_path, USES)
    built(proj, "--whole-files")
    assert kinds(proj) == {"file"}
    edit(proj, "return x + y", "return x * y")
    assert built(proj, "--no-warm") == {A: "passed", B: "passed"}
    assert kinds(proj) == {"file"}  # a fresh process reports no code


def test_record_refuses_code_the_file_does_not_have():
    """The run reports each code object with a digest: one compiled from other source
    (a stale ``.pyc``, ``-O``) leaves the file whole."""
    source = b"def f():\n    assert 1\n    return 2\n"
    tree = codes.compile_tree(source, "m.py")
    ran = [[codes.qualname(c), c.co_firstlineno, codes.check(c)] for c, _ in tree.values()]
    blob = code_kind.record(source, "m.py", ran)
    assert blob is not None
    assert set(json.loads(blob)["code"]) == {"<module>#0", "f#0"}
    optimized = compile(source, "m.py", "exec", dont_inherit=True, optimize=1)
    f = next(c for c in optimized.co_consts if hasattr(c, "co_code"))
    assert code_kind.record(source, "m.py", [ran[0], ["f", 1, codes.check(f)]]) is None
    assert code_kind.changed(blob, codes.compile_tree(source, "m.py")) is None
    assert code_kind.changed(blob, SyntaxError("x")) == "it no longer compiles (SyntaxError)"


@needs_code_noting
def test_the_code_noting_notes_code_run_in_every_thread():
    """What the worker notes with: ``sys.monitoring`` on 3.12+, the extension before."""
    script = """
        import sys
        import threading

        if sys.version_info >= (3, 12):
            from memotest.worker.monitored import Monitored

            ex = Monitored()
        else:
            from memotest._executed import _executed as ex

        def in_thread():
            return 1

        ex.start()
        t = threading.Thread(target=in_thread)
        t.start()
        t.join()
        codes, intact = ex.stop()
        print(intact, any(c.co_name == "in_thread" for c in codes))
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True
    )
    assert out.stdout.split() == ["True", "True"], out.stderr


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="Python 3.11's frame hook")
def test_a_run_that_crashes_in_a_worker_runs_again_fresh(tmp_path):
    """Noting the code that runs through the frame-evaluation hook takes C stack for each
    Python call: a recursion that fits a fresh process may crash a forked one. (Python
    3.12+ notes through ``sys.monitoring``, which takes none: the next test.)"""
    deep = """
        import sys

        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)

        def test_deep():
            sys.setrecursionlimit(200_000)
            assert down(100_000) == 100_000
    """
    proj = project(tmp_path, textwrap.dedent(deep))
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code == 0, out
    assert st[A] == "passed", out
    assert "ran again, fresh: it crashed in a worker" in out, out


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring")
def test_a_deep_recursion_runs_in_a_worker_as_in_a_fresh_process(tmp_path):
    """``sys.monitoring`` takes no C stack per call: the run forked from the worker, which
    notes its code, passes as a fresh process does, and is not run again."""
    deep = """
        import sys

        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)

        def test_deep():
            sys.setrecursionlimit(200_000)
            assert down(100_000) == 100_000
    """
    proj = project(tmp_path, textwrap.dedent(deep))
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code == 0, out
    assert st[A] == "passed", out
    assert "ran again, fresh" not in out, out
    assert kinds(proj) == {"code"}, out  # its code was noted


@needs_code_noting
def test_whole_files_does_not_reuse_records_by_the_code_that_ran(tmp_path):
    """``--whole-files`` withdraws the finer modes: a record made with them (which holds
    by less than the whole file) is not reused by it; one made without them is by the
    default build (it holds more)."""
    proj = project(tmp_path, USES)
    assert built(proj) == {A: "passed", B: "passed"}
    assert kinds(proj) == {"code"}
    edit(proj, "return x + y", "return x * y")  # code no run executed
    assert built(proj) == {A: "cached", B: "cached"}
    assert built(proj, "--whole-files") == {A: "passed", B: "passed"}
    assert kinds(proj) == {"file"}
    assert built(proj) == {A: "cached", B: "cached"}


def test_a_module_body_that_reads_its_own_line_number_runs_again(tmp_path):
    """A module body can see its line numbers (``sys._getframe().f_lineno``, logging's
    ``%(lineno)d``, a warning): a comment above it re-runs what imported it."""
    proj = project(
        tmp_path,
        "from pkg import a\n\ndef test_a():\n    assert a.LINE == 3\n",
        {"pkg/a.py": "import sys\n\nLINE = sys._getframe().f_lineno\n" + PKG_A},
    )
    assert built(proj) == {A: "passed", B: "passed"}
    edit(proj, "import sys\n", "import sys\n# a comment\n")
    assert built(proj)[A] == "failed"
