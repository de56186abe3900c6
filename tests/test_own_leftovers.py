"""A path a run looked for and then created itself is an input as the run found it: absent
(``inputs/absent.py``). Real builds under the real shim.

The case it is for: ``coverage erase`` looks for ``.coverage``, ``coverage combine`` makes
it; pytest looks for its ``<name>current`` links before making them. Such a run was not
reusable at all ("created by the target after it looked for it"), so a fresh checkout (a
CI job, a remote cache) never replayed it.
"""

from __future__ import annotations

import sys

import pytest
from conftest import build_statuses, memotest, write_tree

PY = sys.executable
# Like ``coverage erase`` then ``coverage combine``: remove the data file if it is there,
# then write it.
ERASE_COMBINE = (
    "import os; os.path.exists('.coverage') and os.remove('.coverage'); "
    "open('.coverage', 'w').write('data'); print('combined')"
)


def project(tmp_path, code: str):
    return write_tree(
        tmp_path / "proj",
        {"memotest.toml": f"[targets.cov]\ncommand = [{PY!r}, '-c', {code!r}]\n"},
    )


def test_a_path_looked_for_then_created_holds_where_it_is_absent_again(tmp_path):
    root = project(tmp_path, ERASE_COMBINE)
    code, out, got = build_statuses(root, "-v")
    assert (code, got) == (0, {"cov": "passed"}), out
    assert "not cached" not in out, out
    # A fresh checkout: the run's own leftover is not there. The first run replays.
    (root / ".coverage").unlink()
    code, out, got = build_statuses(root, "-v")
    assert got == {"cov": "cached"}, out


def test_the_runs_own_leftover_is_another_state_and_runs(tmp_path):
    root = project(tmp_path, ERASE_COMBINE)
    assert build_statuses(root)[2] == {"cov": "passed"}
    _, out, got = build_statuses(root, "-v")  # .coverage is there now: found and removed
    assert got == {"cov": "passed"}, out
    assert ".coverage: appeared" in out, out
    assert build_statuses(root)[2] == {"cov": "cached"}


# The answer of an ``unlink`` reaches the program: one that says whether it removed an old
# data file (or fails when it did) decides by it, then makes the file anyway. Kept as an
# input (docs/limits.md, "A run's own leftovers"): the leftover re-runs it once.
UNLINK_SAYS = (
    "import os\n"
    "try:\n    os.unlink('.data'); print('removed old data')\n"
    "except FileNotFoundError:\n    print('no old data')\n"
    "open('.data', 'w').write('data')\n"
)


def test_the_answer_of_an_unlink_is_an_input_even_when_the_run_remakes_the_path(tmp_path):
    root = project(tmp_path, UNLINK_SAYS)
    assert build_statuses(root)[2] == {"cov": "passed"}
    _, out, got = build_statuses(root, "-v")  # the leftover: the unlink now succeeds
    assert got == {"cov": "passed"}, out
    log = memotest("show", "--log", "cov", cwd=root).stdout.decode()
    assert "removed old data" in log, log
    assert build_statuses(root)[2] == {"cov": "cached"}


# Like pytest-benchmark under a plain ``python -m pytest``: the import system lists the
# current folder, then the plugin makes ``.benchmarks`` there (``os.makedirs``, exist_ok).
LIST_THEN_MKDIR = (
    "import os; names = sorted(os.listdir('.')); "
    "os.makedirs('.benchmarks', exist_ok=True); print(names)"
)


def test_a_leftover_in_a_folder_the_run_listed_runs_it_once_more(tmp_path):
    """What the run listed did not hold its leftover; the next run lists it with it: another
    state, run once (its result could differ: it sees the entry), then replayed."""
    root = project(tmp_path, LIST_THEN_MKDIR)
    assert build_statuses(root)[2] == {"cov": "passed"}
    _, out, got = build_statuses(root, "-v")
    assert got == {"cov": "passed"}, out
    assert "gained entries: .benchmarks" in out, out
    assert build_statuses(root)[2] == {"cov": "cached"}
    # A fresh checkout has no leftover: the first record holds there again.
    (root / ".benchmarks").rmdir()
    assert build_statuses(root)[2] == {"cov": "cached"}


# A folder one run makes and another only finds (``os.makedirs(exist_ok=True)``: ``mkdir``
# answers EEXIST, then a ``stat`` sees a folder), as pytest-benchmark makes ``.benchmarks``
# in every pytest run: what the finder saw (a folder, its mode) is what stays there, and
# the check after its run refuses a record whose folder went or appeared meanwhile. Each
# target waits for a marker file the other leaves, so that the two overlap whatever the
# machine's load; ``SLOW`` bounds the wait.
SLOW = 20
MARKS = ["*.started", "*.done", "*.looked", "*.saw"]


def overlapping(tmp_path, first: str, second: str):
    """Two targets that run at once: ``a`` does ``first`` after ``b`` started, ``b`` does
    ``second`` once ``a`` did ``first``; both end after both did theirs."""
    wait = (
        "import os, sys, time\n"
        "def wait(name):\n"
        f"    end = time.time() + {SLOW}\n"
        "    while not os.path.exists(name) and time.time() < end: time.sleep(0.02)\n"
        "def mark(name): open(name, 'w').close()\n"
    )
    a = wait + f"wait('b.started')\n{first}\nmark('a.done')\nwait('b.done')\n"
    b = wait + f"mark('b.started')\nwait('a.done')\n{second}\nmark('b.done')\n"
    return write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": (
                f"[settings]\nignore = {MARKS!r}\n"
                f"[targets.a]\ncommand = [{PY!r}, 'a.py']\n"
                f"[targets.b]\ncommand = [{PY!r}, 'b.py']\n"
            ),
            "a.py": a,
            "b.py": b,
        },
    )


def clean_marks(root) -> None:
    for pattern in MARKS:
        for p in root.glob(pattern):
            p.unlink()


def hazards(root, *args: str) -> tuple[str, dict[str, str]]:
    clean_marks(root)
    _code, out, got = build_statuses(root, "-j", "2", *args)
    return out, got


MAKEDIRS = "os.makedirs('.benchmarks', exist_ok=True)"


def test_a_folder_one_run_makes_and_another_finds_is_no_hazard(tmp_path):
    root = overlapping(tmp_path, MAKEDIRS, MAKEDIRS + "; assert os.path.isdir('.benchmarks')")
    out, got = hazards(root)
    assert got == {"a": "passed", "b": "passed"}, out
    assert "hazard" not in out, out
    # The run whose mkdir made the folder saw it absent (an exclusive creation, held as a
    # lookup that missed): it runs once more, finding it; then both replay. The marks are
    # left, so that the one that runs does not wait for the other, replayed (SLOW).
    _code, out, got = build_statuses(root, "-j", "2")
    assert "hazard" not in out and "cached" in got.values(), out
    _code, out, got = build_statuses(root, "-j", "2")
    assert got == {"a": "cached", "b": "cached"}, out


# The attacks: the same overlap, where what the second run saw is not what stays.
ATTACKS = {
    # it looked before the folder was made: saw it absent
    "looked-before": ("time.sleep(0.5); os.mkdir('d')", "print(os.path.isdir('d'))"),
    # a file made, not a folder: its stat shows a size the writer may still change
    "a-file": ("open('d', 'w').write('x' * 10)", "print(os.stat('d').st_size)"),
    # the folder changed after it was made (its mode): seen before the change
    "chmod-after": (
        "os.mkdir('d'); mark('a.done'); wait('b.saw'); os.chmod('d', 0o700)",
        "print(oct(os.stat('d').st_mode)); mark('b.saw')",
    ),
    # the folder listed: its entries are what the maker puts in it
    "listed": ("os.mkdir('d'); open('d/x', 'w').close()", "print(os.listdir('d'))"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_what_another_run_makes_and_this_one_sees_otherwise_is_a_hazard(tmp_path, name):
    first, second = ATTACKS[name]
    if name == "looked-before":  # b looks first, then a makes it while b still runs
        root = overlapping(tmp_path, "", "")
        a = root / "a.py"
        b = root / "b.py"
        a.write_text(a.read_text().replace("wait('b.started')", f"wait('b.looked')\n{first}"))
        b.write_text(b.read_text().replace("mark('b.started')", f"{second}\nmark('b.looked')"))
    else:
        root = overlapping(tmp_path, first, second)
    out, _got = hazards(root)
    assert "hazard:" in out, out
