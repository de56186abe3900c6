"""A path a run looked for and then created itself is an input as the run found it: absent
(``inputs/absent.py``). Real builds under the real shim.

The case it is for: ``coverage erase`` looks for ``.coverage``, ``coverage combine`` makes
it; pytest looks for its ``<name>current`` links before making them. Such a run was not
reusable at all ("created by the target after it looked for it"), so a fresh checkout (a
CI job, a remote cache) never replayed it.
"""

from __future__ import annotations

import sys

from conftest import build_statuses, write_tree

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
