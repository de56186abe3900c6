"""``tox.ini`` and ``setup.cfg`` read only by pytest's configuration search hold by the
sections pytest takes (``[pytest]``, ``[tool:pytest]``), or their absence
(``memotest_pytest/readers.py``): real pytest builds forked from a warm worker, real edits.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import build_statuses, memotest, write_tree
from memotest_pytest import readers as pytest_readers
from test_sections import kind

from memotest.inputs import readers

A = "pytest:tests/test_a.py"
READS = "pytest:tests/test_reads.py"
TOX = """\
[tox]
envlist = py3

[testenv]
deps =
    pytest
commands = pytest {posargs}

[pytest]
addopts = -q
"""


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    return write_tree(
        tmp_path / "proj",
        {
            "tests/test_a.py": "def test_a():\n    pass\n",
            **{rel: textwrap.dedent(text) for rel, text in files.items()},
        },
    )


def built(proj: Path) -> dict[str, str]:
    code, out, st = build_statuses(proj, "--pytest", "-v")
    assert code in (0, 1), out
    return st


def edit(proj: Path, rel: str, old: str, new: str) -> None:
    path = proj / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def collections(proj: Path) -> int:
    """How many runs of pytest's collection are recorded."""
    show = memotest("show", "--pytest", "pytest-collection:.", cwd=proj).stdout.decode()
    line = next(x for x in show.splitlines() if "recorded runs (variants):" in x)
    return int(line.split(":")[1].split(";")[0])


def test_a_tox_ini_holds_by_its_pytest_section(tmp_path):
    """pytest's configuration in tox.ini: an edit of a tox env replays every target and
    the collection; one of [pytest] runs them again; a test that reads tox.ini itself
    holds all of it; a file an iniconfig may refuse runs them again."""
    reads = "def test_reads():\n    assert 'pytest' in open('tox.ini').read()\n"
    proj = project(tmp_path, {"tox.ini": TOX, "tests/test_reads.py": reads})
    assert built(proj) == {A: "passed", READS: "passed"}
    assert kind(proj, A, "tox.ini") == "section"
    assert kind(proj, READS, "tox.ini") == "file"
    assert kind(proj, "pytest-collection:.", "tox.ini") == "section"
    edit(proj, "tox.ini", "    pytest\n", "    pytest\n    coverage\n")
    assert built(proj) == {A: "cached", READS: "passed"}
    assert collections(proj) == 1
    edit(proj, "tox.ini", "addopts = -q", "addopts = -q -p no:doctest")
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "tox.ini: its [pytest] section changed" in explain, explain
    assert built(proj) == {A: "passed", READS: "passed"}
    # a name twice in a section: iniconfig refuses it, and pytest stops
    edit(proj, "tox.ini", "commands = pytest {posargs}", "commands = a\ncommands = b")
    explain = memotest("explain", A, cwd=proj).stdout.decode()
    assert "is no longer plain ini" in explain, explain


def test_the_collection_replays_a_tox_ini_without_a_pytest_section(tmp_path):
    """pytest's search reads a tox.ini on its way to setup.cfg's [tool:pytest]: its tox
    envs are nothing to the collection; a [pytest] section made there is."""
    tox = TOX.replace("\n[pytest]\naddopts = -q\n", "")
    proj = project(tmp_path, {"tox.ini": tox, "setup.cfg": "[tool:pytest]\naddopts = -q\n"})
    assert built(proj) == {A: "passed"}
    assert kind(proj, "pytest-collection:.", "tox.ini") == "section"
    edit(proj, "tox.ini", "envlist = py3", "envlist = py3, lint")
    assert built(proj) == {A: "cached"}
    assert collections(proj) == 1
    (proj / "tox.ini").write_text(tox + "\n[pytest]\naddopts = -q\n")
    built(proj)
    assert collections(proj) == 2


def test_the_digest_of_the_sections():
    digest = pytest_readers.ini_digest
    base = digest(TOX.encode(), "/p/tox.ini")
    assert base.startswith("pytest-tox-ini:")
    assert digest(TOX.replace("py3", "py312").encode(), "/p/tox.ini") == base
    assert digest(TOX.replace("-q", "-v").encode(), "/p/tox.ini") != base
    assert digest(TOX.replace("[pytest]", "[pytest2]").encode(), "/p/tox.ini") != base
    cfg = b"[metadata]\nname = x\n\n[tool:pytest]\naddopts = -q\n"
    assert digest(cfg, "/p/setup.cfg") != digest(cfg.replace(b"-q", b"-v"), "/p/setup.cfg")
    assert digest(cfg, "/p/setup.cfg") == digest(cfg.replace(b"= x", b"= y"), "/p/setup.cfg")
    # what an iniconfig may refuse or read otherwise: whole
    for bad in (
        "k = 1\n[a]\n",  # a name before any section
        "[a]\n  more\n",  # a continuation after a header
        "[a]\nk = 1\n[a]\n",  # a section twice
        "[a]\nk = 1\nk = 2\n",  # a name twice
        "[a] # note\n",  # a comment on a header
        "[ a]\n",  # spaces around a section's name
        "[a]\nsome line\n",  # neither a name nor a continuation
        "[a]\nk y = 1\n",  # a name with a space
    ):
        assert digest(bad.encode(), "/p/tox.ini") == readers.UNPARSED, bad
    assert digest(b"\xff\xfe", "/p/tox.ini") == readers.UNPARSED
