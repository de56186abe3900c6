"""``pyproject.toml`` read only by pytest, for its ``tool.pytest`` table, and
``entry_points.txt`` read only by ``importlib.metadata``, for its entry points
(``memotest/inputs/readers.py``): real pytest builds forked from a warm worker, real edits."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import build_statuses, memotest, write_tree
from memotest_pytest import readers as pytest_readers

from memotest.builtin import readers as builtin_readers
from memotest.inputs import readers
from memotest.model import Kind
from memotest.store import Store

A = "pytest:tests/test_a.py"
B = "pytest:tests/test_b.py"

PYPROJECT = """\
[project]
name = "demo"
version = "1.0"

[tool.pytest.ini_options]
addopts = "-q"
"""


def project(tmp_path: Path, test_a: str, extra: dict[str, str] | None = None) -> Path:
    return write_tree(
        tmp_path / "proj",
        {
            "pyproject.toml": PYPROJECT,
            "tests/test_a.py": textwrap.dedent(test_a),
            "tests/test_b.py": "def test_b():\n    pass\n",
            **{rel: textwrap.dedent(text) for rel, text in (extra or {}).items()},
        },
    )


def built(proj: Path, *args: str) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v", *args)
    assert code in (0, 1), out
    return st


def kind(proj: Path, target: str, rel: str = "pyproject.toml") -> str:
    path = str(proj / rel)
    with Store.open(proj, lock=False) as store:
        record = store.records([target])[target]
        (found,) = [Kind(i.kind).value for i in record.inputs if i.path == path]
        return found


def edit(proj: Path, old: str, new: str, rel: str = "pyproject.toml") -> None:
    path = proj / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


PASSES = "def test_a():\n    pass\n"


#: Tests that read ``pyproject.toml`` otherwise than pytest does: each holds all of it.
READERS = {
    # The test reads it itself.
    "tests/test_reads.py": """
        def test_reads():
            with open("pyproject.toml") as f:
                assert 'version = "1.0"' in f.read()
    """,
    # Another process reads it.
    "tests/test_cat.py": """
        import subprocess

        def test_cat():
            out = subprocess.run(["cat", "pyproject.toml"], capture_output=True).stdout
            assert b'"1.0"' in out
    """,
}


def test_only_the_pytest_table_of_pyproject_counts(tmp_path):
    """Held by its ``[tool.pytest]`` table where only pytest read it; whole where the test
    itself or another process read it (one project: each its own target); a pyproject
    that no longer parses runs them again."""
    proj = project(tmp_path, PASSES, READERS)
    reads, cat = "pytest:tests/test_reads.py", "pytest:tests/test_cat.py"
    assert built(proj) == {A: "passed", B: "passed", reads: "passed", cat: "passed"}
    assert kind(proj, A) == "section"
    assert kind(proj, B) == "section"
    assert kind(proj, reads) == "file"
    assert kind(proj, cat) == "file"
    edit(proj, 'version = "1.0"', 'version = "1.1"')
    (proj / "pyproject.toml").write_text(
        (proj / "pyproject.toml").read_text() + "\n[tool.ruff]\nline-length = 90\n"
    )
    assert built(proj) == {A: "cached", B: "cached", reads: "failed", cat: "failed"}
    edit(proj, 'addopts = "-q"', 'addopts = "-q -p no:doctest"')
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "pyproject.toml: its [tool.pytest] table changed" in explain, explain
    assert built(proj) == {A: "passed", B: "passed", reads: "failed", cat: "failed"}
    # A pyproject that no longer parses runs the tests again.
    edit(proj, "[project]", "[project")  # invalid TOML: pytest stops with a usage error
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "no longer parses as TOML" in explain, explain
    code, out, _ = build_statuses(proj, "--pytest")
    assert code != 0, out


def test_the_digest_of_the_table():
    base = pytest_readers.table_digest(PYPROJECT.encode())
    assert base.startswith("tool.pytest:")
    assert pytest_readers.table_digest(PYPROJECT.replace("1.0", "2.0").encode()) == base
    assert pytest_readers.table_digest(PYPROJECT.replace("-q", "-v").encode()) != base
    assert pytest_readers.table_digest(b"[tool]\npytest = 1\n") != base
    assert pytest_readers.table_digest(b"[project\n") == readers.UNPARSED
    assert pytest_readers.table_digest(b'tool = "x"\n') == readers.UNPARSED
    assert pytest_readers.table_digest(b"\xff\xfe") == readers.UNPARSED


# -- entry_points.txt -------------------------------------------------------------------

EPS = "site/demo_plugins-1.0.dist-info/entry_points.txt"
ENTRY_POINTS = """\
[demo.plugins]
one = demo_one:Plugin

[console_scripts]
demo = demo_one:main
"""


def plugin_project(tmp_path: Path, test_a: str) -> Path:
    """A distribution with entry points in ``site/``, which the tests' conftest puts on
    ``sys.path`` (pytest has scanned the installed distributions before then)."""
    return write_tree(
        tmp_path / "proj",
        {
            "site/demo_plugins-1.0.dist-info/METADATA": "Name: demo-plugins\nVersion: 1.0\n",
            EPS: ENTRY_POINTS,
            "tests/conftest.py": """\
                import os
                import sys

                sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "site"))
            """,
            "tests/test_a.py": textwrap.dedent(test_a),
            "tests/test_b.py": "def test_b():\n    pass\n",
        },
    )


LOADS = """
    from importlib.metadata import entry_points

    def test_a():
        assert [ep.name for ep in entry_points(group="demo.plugins")] == ["one"]
"""


def test_entry_points_hold_by_what_importlib_metadata_parses(tmp_path):
    proj = plugin_project(tmp_path, LOADS)
    assert built(proj) == {A: "passed", B: "passed"}
    assert kind(proj, A, EPS) == "section"
    # What pbr and setuptools change between releases: blank lines, comments.
    edit(proj, "\n\n[console", "\n# generated\n\n\n[console", EPS)
    edit(proj, "one = demo_one:Plugin", "one=demo_one:Plugin   ", EPS)
    assert built(proj) == {A: "cached", B: "cached"}
    edit(proj, "[console_scripts]", "[demo.plugins]\ntwo = demo_two:Plugin\n[console_scripts]", EPS)
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "entry_points.txt: its entry points changed" in explain, explain
    # test_b may read them too: a plugin (hypothesis) scans every group when imported.
    assert built(proj)[A] == "failed"


def test_entry_points_memotest_cannot_parse_are_whole(tmp_path):
    proj = plugin_project(tmp_path, LOADS)
    built(proj)
    # Python 3.11 takes "; legacy" for a name; a parser of another version might not.
    edit(proj, "demo = demo_one:main", "demo = demo_one:main\n; legacy = x", EPS)
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "no longer parses as entry points" in explain, explain
    assert built(proj)[A] == "passed"
    assert kind(proj, A, EPS) == "file"  # recorded whole this time


def test_a_test_that_reads_entry_points_text_depends_on_all_of_it(tmp_path):
    test_a = """
        from importlib.metadata import distribution

        def test_a():
            text = distribution("demo-plugins").read_text("entry_points.txt")
            assert "\\n\\n[console_scripts]" in text
    """
    proj = plugin_project(tmp_path, test_a)
    assert built(proj) == {A: "passed", B: "passed"}
    assert kind(proj, A, EPS) == "file"
    edit(proj, "\n\n[console", "\n[console", EPS)
    assert built(proj) == {A: "failed", B: "cached"}


def test_the_digest_of_entry_points():
    base = builtin_readers.entry_points_digest(ENTRY_POINTS.encode())
    assert base.startswith("entry-points:")
    same = (
        "# top\n\n  [demo.plugins]  \n one =demo_one:Plugin\n[console_scripts]\ndemo= demo_one:main"
    )
    assert builtin_readers.entry_points_digest(same.encode()) == base
    reordered = ENTRY_POINTS.replace("[demo.plugins]", "[x]").replace(
        "[console_scripts]", "[demo.plugins]"
    )
    assert builtin_readers.entry_points_digest(reordered.encode()) != base
    assert builtin_readers.entry_points_digest(b"[g]\nno equals sign\n") == readers.UNPARSED
    assert builtin_readers.entry_points_digest(b"[g]\n; x = y\n") == readers.UNPARSED
    assert builtin_readers.entry_points_digest(b"\xff\xfe") == readers.UNPARSED
    assert readers.digest_of("/x/entry_points.txt", ENTRY_POINTS.encode()) == base
    assert readers.digest_of("/x/pyproject.toml", PYPROJECT.encode()).startswith("tool.")


# -- gzip files -------------------------------------------------------------------------

GZ = "tests/table.json.gz"


def gz_bytes(payload: bytes, name: str) -> bytes:
    import gzip
    import io

    buf = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=buf, mtime=1) as f:
        f.write(payload)
    return buf.getvalue()


READS_GZ = """
    import gzip
    import pathlib

    def test_a():
        path = pathlib.Path(__file__).parent / "table.json.gz"
        with gzip.open(path) as f:
            assert f.read() == b"[1, 2]"
"""


#: Reads the file raw: the name in its header counts, so the file is held whole.
READS_GZ_RAW = """
    import pathlib

    def test_c():
        path = pathlib.Path(__file__).parent / "table.json.gz"
        assert b"tmpabc" in path.read_bytes()
"""
C = "pytest:tests/test_c.py"


def test_a_gzip_file_read_through_gzip_holds_by_its_data_read_raw_whole(tmp_path):
    """``tests/table.json.gz`` holds ``[1, 2]`` under the name ``tmpabc``: A reads it
    through gzip, C reads its bytes."""
    proj = project(tmp_path, READS_GZ)
    write_tree(proj, {"tests/test_c.py": READS_GZ_RAW})
    (proj / GZ).write_bytes(gz_bytes(b"[1, 2]", "tmpabc"))
    assert built(proj) == {A: "passed", B: "passed", C: "passed"}
    assert kind(proj, A, GZ) == "section"
    assert kind(proj, C, GZ) == "file"
    # The same data under another name in the header: what hypothesis's rewrites change.
    (proj / GZ).write_bytes(gz_bytes(b"[1, 2]", "tmpxyz"))
    assert built(proj) == {A: "cached", B: "cached", C: "failed"}
    (proj / GZ).write_bytes(gz_bytes(b"[1, 3]", "tmpxyz"))
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "table.json.gz: its gzip data changed" in explain, explain
    assert built(proj)[A] == "failed"


REWRITES_GZ = """
    import gzip
    import os
    import pathlib
    import tempfile

    def test_a():
        path = pathlib.Path(__file__).parent.parent / "data" / "table.json.gz"
        with gzip.open(path) as f:
            data = f.read()
        fd, tmp = tempfile.mkstemp(dir=path.parent)  # hypothesis's way: a random name
        os.close(fd)
        with gzip.GzipFile(tmp, "wb", mtime=1) as f:
            f.write(data)
        os.replace(tmp, path)
"""


def test_a_gzip_file_rewritten_with_the_same_data_is_kept(tmp_path):
    proj = project(tmp_path, REWRITES_GZ)
    data = "data/table.json.gz"  # not in tests/, which test_b lists
    (proj / data).parent.mkdir()
    (proj / data).write_bytes(gz_bytes(b"[1, 2]", "tmpabc"))
    assert built(proj) == {A: "passed", B: "passed"}  # no fingerprint before this run
    assert built(proj) == {A: "passed", B: "cached"}  # left as found: kept
    assert built(proj) == {A: "cached", B: "cached"}
    assert kind(proj, A, data) == "section"


def test_the_digest_of_gzip_data():
    base = builtin_readers.gzip_digest(gz_bytes(b"x", "a"))
    assert base.startswith("gzip:")
    assert builtin_readers.gzip_digest(gz_bytes(b"x", "another-name")) == base
    assert builtin_readers.gzip_digest(gz_bytes(b"y", "a")) != base
    assert builtin_readers.gzip_digest(b"not gzip at all") == readers.UNPARSED
    assert builtin_readers.gzip_digest(gz_bytes(b"x", "a")[:11]) == readers.UNPARSED  # no NUL
