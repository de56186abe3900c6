"""A path the serially earlier of two overlapping runs had changed for the last time before
the later one started is no hazard (``memotest/loop/schedule.py``'s ``conflict``): the later
one found there what a serial run shows it. Real builds under the real shim, ``-j2``.

The case it is for: Hypothesis writes its caches under ``.hypothesis/`` (the constants of
each local module, the Unicode tables) from the first test file that needs them; the files
started after that read them. Each of those pairs was a hazard, run again alone.

Three targets in serial order ``w``, ``f``, ``r``: ``w`` and ``f`` start; ``w`` does
``before`` and leaves a mark; ``f`` ends once it sees the mark, so that ``r`` starts (in
``f``'s slot) after ``before`` was done; ``r`` does ``seen`` and leaves a mark; ``w`` then
does ``after`` and ends once ``r`` ended, so the two overlap whatever the machine's load.
``SLOW`` bounds each wait.
"""

from __future__ import annotations

import sys

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable
SLOW = 20
MARKS = ["*.mark"]
WAIT = (
    "import os, sys, time\n"
    "def wait(name):\n"
    f"    end = time.time() + {SLOW}\n"
    "    while not os.path.exists(name + '.mark') and time.time() < end: time.sleep(0.02)\n"
    "def mark(name): open(name + '.mark', 'w').close()\n"
)


def project(tmp_path, before: str, after: str, seen: str, writer_first: bool = True):
    """``writer_first`` False: ``w`` comes last in serial order (``r`` needs ``f``, so it
    still starts after ``f``), while the runs happen as above."""
    w = WAIT + f"{before}\nmark('w.before')\nwait('r.seen')\n{after}\nmark('w.done')\n"
    w += "wait('r.done')\n"
    f = WAIT + "wait('w.before'); time.sleep(0.1)\n"
    r = WAIT + f"{seen}\nmark('r.seen')\nwait('w.done')\nmark('r.done')\n"
    targets = {
        "w": f"[targets.w]\ncommand = [{PY!r}, 'w.py']\n",
        "f": f"[targets.f]\ncommand = [{PY!r}, 'f.py']\n",
        "r": f"[targets.r]\ncommand = [{PY!r}, 'r.py']\n",
    }
    order = ["w", "f", "r"] if writer_first else ["f", "r", "w"]
    if not writer_first:
        targets["r"] += "needs = ['f']\n"
    toml = f"[settings]\nignore = {MARKS!r}\n" + "".join(targets[n] for n in order)
    return write_tree(tmp_path / "proj", {"memotest.toml": toml, "w.py": w, "f.py": f, "r.py": r})


def build(root) -> tuple[str, dict[str, str]]:
    _code, out, got = build_statuses(root, "-j", "2")
    return out, got


WRITE_X = "open('x', 'w').write('v1')"
READ_X = "print(open('x').read())"


def test_what_the_earlier_run_wrote_before_the_later_one_started_is_no_hazard(tmp_path):
    root = project(tmp_path, WRITE_X, "", READ_X)
    out, got = build(root)
    assert got == {"w": "passed", "f": "passed", "r": "passed"}, out
    assert "hazard" not in out, out
    # What r read had not changed while it ran: its record holds (the marks are left, so
    # that a run of w or r does not wait).
    out, got = build(root)
    assert got["r"] == "cached", out


def test_a_listing_of_what_the_earlier_run_made_before_the_later_one_started(tmp_path):
    before = "os.mkdir('d'); open('d/1', 'w').close()"
    root = project(tmp_path, before, "", "print(os.listdir('d'))")
    out, got = build(root)
    assert got == {"w": "passed", "f": "passed", "r": "passed"}, out
    assert "hazard" not in out, out


# The attacks: the same runs, where what the later one saw is not what a serial run shows.
ATTACKS = {
    # written again after the later run read it: it saw v1, a serial run shows v2
    "rewritten-after": (WRITE_X, "open('x', 'w').write('v2')", READ_X),
    # made after the later run looked for it: it saw it absent
    "made-after": ("", WRITE_X, "print(os.path.exists('x'))"),
    # an entry added after the later run listed the folder
    "entry-after": (
        "os.mkdir('d'); open('d/1', 'w').close()",
        "open('d/2', 'w').close()",
        "print(os.listdir('d'))",
    ),
    # both wrote it, the earlier one last: the final state is not the serial run's
    "written-last-by-the-earlier": (WRITE_X, "open('x', 'w').write('v2')", "open('x', 'w')"),
    # its mode changed after the later run saw it
    "chmod-after": (WRITE_X, "os.chmod('x', 0o600)", "print(oct(os.stat('x').st_mode))"),
    # removed after the later run read it
    "removed-after": (WRITE_X, "os.remove('x')", READ_X),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_change_after_the_later_run_started_is_a_hazard(tmp_path, name):
    root = project(tmp_path, *ATTACKS[name])
    out, _got = build(root)
    assert "hazard:" in out, out


def test_what_the_serially_later_run_wrote_before_the_earlier_one_started_is_a_hazard(
    tmp_path,
):
    """The writer comes last in serial order: a serial run shows the reader no ``x``."""
    root = project(tmp_path, WRITE_X, "", READ_X, writer_first=False)
    out, _got = build(root)
    assert "hazard:" in out, out


# Hypothesis's cache of a local module's constants (``.hypothesis/constants/<hash>``): the
# first test file writes it, the files started after it read it. Same shape as above, as
# three pytest files; the marks say when each got where. They are kept in a
# ``__pycache__`` folder, a path every build ignores (``--pytest`` reads no settings), and
# ``.hypothesis/constants`` is there before the build, as in a checkout that ran before:
# the first file making it would change the project folder the filler's import system
# listed while it ran (a hazard that stays).
MARK_DIR = "marks/__pycache__/"
WAIT_FOR = (
    "import os, time\n\n"
    "def wait(name):\n"
    f"    end = time.time() + {SLOW}\n"
    f"    while not os.path.exists('{MARK_DIR}' + name) and time.time() < end:\n"
    "        time.sleep(0.02)\n\n"
    "def mark(name):\n"
    f"    open('{MARK_DIR}' + name, 'w').close()\n\n"
)
GIVEN = (
    "from hypothesis import given, settings, strategies as st\n"
    "import mod\n\n"
    "@given(st.integers())\n"
    "@settings(max_examples=5, database=None)\n"
    "def test_given(x):\n"
    "    assert mod.inc(x) == x + 1\n\n"
)


def test_a_hypothesis_cache_written_before_the_next_file_started_is_no_hazard(
    tmp_path, host_pytest_plugins
):
    pytest.importorskip("hypothesis")
    root = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            MARK_DIR + "keep": "",
            ".hypothesis/constants/keep": "",
            "mod.py": "LIMIT = 123457\n\ndef inc(x):\n    return x + 1\n",
            "tests/test_1_writer.py": WAIT_FOR
            + GIVEN
            + "def test_overlaps():\n    mark('w')\n    wait('r')\n",
            "tests/test_2_filler.py": WAIT_FOR
            + "def test_frees_its_slot():\n    wait('w')\n    time.sleep(0.1)\n",
            "tests/test_3_reader.py": WAIT_FOR + GIVEN + "def test_marks():\n    mark('r')\n",
        },
    )
    _code, out, got = build_statuses(root, "-j", "2", "--pytest")
    assert set(got.values()) == {"passed"} and len(got) == 3, out
    assert "hazard" not in out, out
    # The reader read the cache the writer made while both ran.
    paths = memotest("show", "--paths", "pytest:tests/test_3_reader.py", cwd=root).stdout
    assert b".hypothesis/constants/" in paths, paths.decode()


# Hypothesis's Unicode tables (``plugins/memotest_pytest/ignore.py``): its codec table is
# written again, the same bytes, through ``.hypothesis/tmp``, by every run that uses it,
# as ``intervals_from_codec`` does; two such runs side by side wrote the same path.
TABLE = ".hypothesis/unicode_data/14.0.0/codec-v2-utf-8.json.gz"
REWRITE_TABLE = (
    "import tempfile\n"
    f"p = {TABLE!r}\n"
    "data = open(p, 'rb').read() if os.path.exists(p) else b'table'\n"
    "os.makedirs('.hypothesis/tmp', exist_ok=True)\n"
    "fd, t = tempfile.mkstemp(dir='.hypothesis/tmp'); os.write(fd, data); os.close(fd)\n"
    "os.renames(t, p)\n"
)


def test_hypothesis_tables_written_again_by_two_runs_are_no_hazard(tmp_path):
    root = project(tmp_path, REWRITE_TABLE, "", REWRITE_TABLE)
    (root / ".hypothesis").mkdir()
    out, got = build(root)
    assert got == {"w": "passed", "f": "passed", "r": "passed"}, out
    assert "hazard" not in out, out
    assert (root / TABLE).read_bytes() == b"table"
    out, got = build(root)  # and each is reusable (not "read and then written")
    assert got == {"w": "cached", "f": "cached", "r": "cached"}, out


READ_ALL = "import sys\nfor p in sys.argv[1:]:\n    print(p, open(p).read())\n"
HYPOTHESIS_FILES = {
    ".hypothesis/examples/0a1b": "a saved failing example",
    ".hypothesis/constants/2c3d": "constants of a module",
    ".hypothesis/unicode_data/14.0.0/charmap.json.gz": "a table",
}


@pytest.mark.parametrize(("path", "runs"), [(p, "unicode" not in p) for p in HYPOTHESIS_FILES])
def test_only_hypothesis_tables_are_ignored(tmp_path, path, runs):
    """The saved examples and the constants are what a run of Hypothesis replays and
    draws from: changed, the target runs again. A Unicode table is not an input."""
    toml = f"[targets.t]\ncommand = {[PY, 'read.py', *sorted(HYPOTHESIS_FILES)]!r}\n"
    root = write_tree(
        tmp_path / "proj", {"memotest.toml": toml, "read.py": READ_ALL, **HYPOTHESIS_FILES}
    )
    assert build_statuses(root)[2] == {"t": "passed"}
    (root / path).write_text("changed")
    _code, out, got = build_statuses(root)
    assert got == {"t": "passed" if runs else "cached"}, out


# A folder one run makes at the project's root while another run, started with it, had
# listed the root through its import system only (``Trace.listings``): what that listing
# showed is which importable names are there. A dot-named folder is none of them (a
# tool's cache: ``.hypothesis``, made by the first test file of a fresh checkout).
def root_entry_project(tmp_path, name: str):
    return write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\npythonpath = .\n",
            MARK_DIR + "keep": "",
            "mod.py": "VALUE = 1\n",
            "tests/test_1_maker.py": WAIT_FOR
            + "import mod\n\n"
            + f"def test_makes():\n    wait('r')\n    os.mkdir({name!r})\n    mark('w')\n",
            "tests/test_2_lister.py": WAIT_FOR
            + "import mod\n\n"
            + "try:\n    import helper\nexcept ImportError:\n    helper = None\n\n"
            + "def test_lists():\n    mark('r')\n    wait('w')\n",
        },
    )


@pytest.mark.parametrize(("name", "hazard"), [(".toolcache", False), ("helper", True)])
def test_an_entry_an_import_could_not_find_is_no_hazard(tmp_path, name, hazard):
    """``helper`` is a name the other run's import looked for (absent then): a hazard."""
    root = root_entry_project(tmp_path, name)
    _code, out, got = build_statuses(root, "-j", "2", "--pytest")
    assert len(got) == 2, out
    assert ("hazard:" in out) is hazard, out
    if not hazard:  # (run again alone, the maker finds its folder there and fails)
        assert set(got.values()) == {"passed"}, out
