"""One configured worker for the test files of every folder that has no conftest of its
own (``memotest_pytest.pinned.conftest_folder``): pytest run on a file imports as
initial conftests those of the folders from the configuration's down to the file's, so
the files of folders in between get the same configuration. A conftest that appears in
such a folder gives its files a worker of their own, or a fresh run. Real workers, real
forks, under the real shim."""

from __future__ import annotations

from conftest import build_statuses, write_tree

build = build_statuses

#: Each test writes the pid of the process its run was forked from, and whether pytest
#: was configured in that process (a configured worker) rather than in its own.
REPORT = """
import os

import conftest


def test_{name}():
    worker = conftest.CONFIGURED[0] != os.getpid()
    with open(os.path.join({out!r}, "{name}"), "w") as f:
        f.write(f"{{os.getppid()}} {{worker}}")
"""

CONFTEST = """
import os

CONFIGURED = []


def pytest_configure(config):
    CONFIGURED.append(os.getpid())
"""


def test_the_files_of_folders_without_a_conftest_share_one_worker(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "conftest.py": CONFTEST,
            "tests/test_a.py": REPORT.format(name="a", out=str(out)),
            "tests/sub/test_b.py": REPORT.format(name="b", out=str(out)),
            "tests/sub/deeper/test_c.py": REPORT.format(name="c", out=str(out)),
        },
    )
    code, text, st = build(proj, "-v", "-j", "1", "--pytest")
    assert code == 0 and set(st.values()) == {"passed"}, text
    rows = [(out / name).read_text().split() for name in "abc"]
    # A run that fell back to a fresh process (a loaded machine) configured pytest itself.
    forked = {ppid for ppid, worker in rows if worker == "True"}
    assert len(forked) <= 1, (rows, text)


STARTED_USER = """
import os


def test_b():
    assert os.environ.get("SUB_STARTED", "no") == "{expected}"
"""

#: A conftest with a session-start hook: pytest calls it only for an initial conftest (one
#: imported before the session starts), as pytest on the file's folder imports it; one
#: imported during the collection comes too late for it.
SUB_CONFTEST = """
import os


def pytest_sessionstart(session):
    os.environ["SUB_STARTED"] = "yes"
"""


def test_a_conftest_made_in_a_folder_reruns_its_files_configured_by_it(tmp_path):
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": "def test_a():\n    pass\n",
            "tests/sub/test_b.py": STARTED_USER.format(expected="no"),
        },
    )
    code, text, st = build(proj, "-v", "--pytest")
    assert code == 0 and st["pytest:tests/sub/test_b.py"] == "passed", text
    code, text, st = build(proj, "-v", "--pytest")
    assert st["pytest:tests/sub/test_b.py"] == "cached", text
    # A fresh `pytest tests/sub/test_b.py` now imports the conftest before its session
    # starts: its hook runs. A worker configured for tests/ would have imported it late,
    # during the collection, and the hook would not have run.
    (proj / "tests/sub/conftest.py").write_text(SUB_CONFTEST)
    code, text, st = build(proj, "-v", "--pytest")
    assert st["pytest:tests/sub/test_b.py"] == "failed", text
    assert st["pytest:tests/test_a.py"] == "cached", text
    (proj / "tests/sub/test_b.py").write_text(STARTED_USER.format(expected="yes"))
    code, text, st = build(proj, "-v", "--pytest")
    assert code == 0 and st["pytest:tests/sub/test_b.py"] == "passed", text


MAKES_CONFTEST = f"""
import pathlib


def test_a():
    here = pathlib.Path(__file__).parent
    (here / "zsub" / "conftest.py").write_text({SUB_CONFTEST!r})
"""


def test_a_conftest_made_after_the_targets_were_listed_runs_its_files_fresh(tmp_path):
    """The loader gave tests/zsub's file the worker of the root (no conftest in between);
    the run before it makes tests/zsub/conftest.py. A fresh pytest imports it as an
    initial conftest: the run from the root's worker would not, so it runs fresh
    (``worker_side.unfaithful``)."""
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": MAKES_CONFTEST,
            "tests/zsub/test_b.py": STARTED_USER.format(expected="yes"),
        },
    )
    _, text, st = build(proj, "-v", "-j", "1", "--pytest")
    assert (proj / "tests/zsub/conftest.py").is_file(), text
    assert st["pytest:tests/zsub/test_b.py"] == "passed", text
