"""Which Python files a run notes by the code that ran, whatever the project's layout
(``memotest/worker/code_watch.py``'s ``project_file``): a pytest configuration inside
``tests/`` makes pytest's rootdir, where the targets run, that folder, while the library
lives beside it; and why a run's files were kept whole, per run (``build -v``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import build_statuses, write_tree
from test_codelevel import PKG_A, USES, edit

from memotest.model import Kind
from memotest.store import Store

# Named from the repository, where the store is too (plugins/memotest_pytest/plugin.py's
# project_home), not from pytest's rootdir ``tests/``.
A = "pytest:tests/test_a.py"
B = "pytest:tests/test_b.py"


def layout(tmp_path: Path, test_a: str = USES) -> Path:
    """``pytest.ini`` in ``tests/`` (pytest's rootdir is ``tests/``), ``pkg`` at the
    repository's root, found through the ini's ``pythonpath``."""
    return write_tree(
        tmp_path / "repo",
        {
            "tests/pytest.ini": "[pytest]\npythonpath = ..\n",
            "pkg/__init__.py": "from pkg import a\n",
            "pkg/a.py": PKG_A,
            "tests/test_a.py": test_a,
            "tests/test_b.py": "import pkg\n\ndef test_b():\n    assert pkg\n",
        },
    )


def built(repo: Path, *args: str) -> tuple[str, dict[str, str]]:
    code, out, st = build_statuses(repo, "--pytest", "tests", *args)
    assert code in (0, 1), out
    return out, st


def kinds(repo: Path) -> set[str]:
    path = str(repo / "pkg/a.py")
    assert not (repo / "tests" / ".memotest").exists()  # one store, at the repository
    with Store.open(repo, lock=False) as store:
        records = store.records([A, B]).values()
        return {Kind(i.kind).value for r in records for i in r.inputs if i.path == path}


def test_a_library_beside_the_rootdir_is_noted_by_the_code_that_ran(tmp_path):
    repo = layout(tmp_path)
    assert built(repo)[1] == {A: "passed", B: "passed"}
    assert kinds(repo) == {"code"}
    edit(repo, "return x + y", "return x * y")  # unused's body: no run executed it
    assert built(repo)[1] == {A: "cached", B: "cached"}
    edit(repo, "return x + 1", "return x + 2")  # used's body: only test_a ran it
    assert built(repo)[1] == {A: "failed", B: "cached"}


def test_build_v_says_why_a_run_kept_its_files_whole(tmp_path):
    forks = """
        import os
        import pkg

        def test_a():
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
    """
    repo = layout(tmp_path, textwrap.dedent(forks))
    out, st = built(repo, "-v")
    assert st == {A: "passed", B: "passed"}, out
    lines = out.splitlines()
    line = next(i for i, text in enumerate(lines) if A in text)
    assert "Python files kept whole: it forked a Python process" in lines[line + 1], out
    line = next(i for i, text in enumerate(lines) if B in text)
    assert "kept whole" not in lines[line + 1], out  # it noted its code
    out, st = built(repo, "-v", "--whole-files")
    assert "Python files kept whole: --whole-files" in out, out


def test_show_and_explain_find_the_records_from_the_repository(tmp_path):
    """The issue's project: a Makefile at the root, pytest's settings in ``tests/``."""
    from conftest import memotest

    repo = layout(tmp_path)
    (repo / "Makefile").write_text("all:\n\techo hi\n")
    assert built(repo)[1] == {A: "passed", B: "passed"}
    show = memotest("show", A, cwd=repo)
    assert show.returncode == 0, show.stderr.decode()
    assert f"{A}: passed" in show.stdout.decode()
    edit(repo, "return x + 1", "return x + 2")
    explain = memotest("explain", A, cwd=repo)
    assert "would run" in explain.stdout.decode(), explain.stderr.decode()
    assert "used changed" in explain.stdout.decode()
