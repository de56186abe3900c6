"""``pyproject.toml`` read only by pytest, for its ``tool.pytest`` table
(``tracer/sections.py``): real pytest builds forked from a warm worker, real edits."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import build_statuses, memotest, write_tree

from memotest.model import Kind
from memotest.store import Store
from memotest.tracer import sections

A = "pytest:tests/test_a.py"
B = "pytest:tests/test_b.py"

PYPROJECT = """\
[project]
name = "demo"
version = "1.0"

[tool.pytest.ini_options]
addopts = "-q"
"""


def project(tmp_path: Path, test_a: str) -> Path:
    return write_tree(
        tmp_path / "proj",
        {
            "pyproject.toml": PYPROJECT,
            "tests/test_a.py": textwrap.dedent(test_a),
            "tests/test_b.py": "def test_b():\n    pass\n",
        },
    )


def built(proj: Path, *args: str) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", *args)
    assert code in (0, 1), out
    return st


def kind(proj: Path, target: str) -> str:
    path = str(proj / "pyproject.toml")
    with Store.open(proj, lock=False) as store:
        record = store.records([target])[target]
        (found,) = [Kind(i.kind).value for i in record.inputs if i.path == path]
        return found


def edit(proj: Path, old: str, new: str) -> None:
    path = proj / "pyproject.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


PASSES = "def test_a():\n    pass\n"


def test_only_the_pytest_table_of_pyproject_counts(tmp_path):
    proj = project(tmp_path, PASSES)
    assert built(proj) == {A: "passed", B: "passed"}
    assert kind(proj, A) == "section"
    edit(proj, 'version = "1.0"', 'version = "1.1"')
    (proj / "pyproject.toml").write_text(
        (proj / "pyproject.toml").read_text() + "\n[tool.ruff]\nline-length = 90\n"
    )
    assert built(proj) == {A: "cached", B: "cached"}
    edit(proj, 'addopts = "-q"', 'addopts = "-q -p no:doctest"')
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "pyproject.toml: its [tool.pytest] table changed" in explain, explain
    assert built(proj) == {A: "passed", B: "passed"}


def test_a_pyproject_that_no_longer_parses_runs_the_tests_again(tmp_path):
    proj = project(tmp_path, PASSES)
    built(proj)
    edit(proj, "[project]", "[project")  # invalid TOML: pytest stops with a usage error
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "no longer parses as TOML" in explain, explain
    code, out, _ = build_statuses(proj, "--pytest")
    assert code != 0, out


def test_a_test_that_reads_pyproject_itself_depends_on_all_of_it(tmp_path):
    test_a = """
        def test_a():
            with open("pyproject.toml") as f:
                assert 'version = "1.0"' in f.read()
    """
    proj = project(tmp_path, test_a)
    assert built(proj) == {A: "passed", B: "passed"}
    assert kind(proj, A) == "file"
    assert kind(proj, B) == "section"
    edit(proj, 'version = "1.0"', 'version = "1.1"')
    assert built(proj) == {A: "failed", B: "cached"}


def test_a_pyproject_another_process_reads_is_whole(tmp_path):
    test_a = """
        import subprocess

        def test_a():
            out = subprocess.run(["cat", "pyproject.toml"], capture_output=True).stdout
            assert b'"1.0"' in out
    """
    proj = project(tmp_path, test_a)
    built(proj)
    assert kind(proj, A) == "file"
    edit(proj, 'version = "1.0"', 'version = "1.1"')
    assert built(proj) == {A: "failed", B: "cached"}


def test_the_digest_of_the_table():
    base = sections.table_digest(PYPROJECT.encode())
    assert base.startswith("tool.pytest:")
    assert sections.table_digest(PYPROJECT.replace("1.0", "2.0").encode()) == base
    assert sections.table_digest(PYPROJECT.replace("-q", "-v").encode()) != base
    assert sections.table_digest(b"[tool]\npytest = 1\n") != base
    assert sections.table_digest(b"[project\n") == sections.UNPARSED
    assert sections.table_digest(b'tool = "x"\n') == sections.UNPARSED
    assert sections.table_digest(b"\xff\xfe") == sections.UNPARSED
