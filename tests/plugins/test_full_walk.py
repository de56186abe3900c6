"""A tox env whose pytest is given no path collects its whole rootdir (cachetools's
``py.test --cov=...``): ``memotest_walk`` holds each folder pytest collects whole by the
entries that can change what it collects (``collect_patterns``), and keeps pytest from
stat'ing the files it would collect nothing from. A tool's dot-named leftover and an edited
README replay; a new test file or folder re-runs; a plugin that collects other files keeps
every entry. Real tox, real pytest."""

from __future__ import annotations

import os

import pytest
from test_tox import count, env_project, tox
from test_tox import pytestmark as tox_marks

pytestmark = tox_marks

SITE = os.path.dirname(os.path.dirname(pytest.__file__))
TEST = "def test_a():\n    assert 1 + 1 == 2\n"
#: A plugin that collects ``*.check`` files, dot-named ones included: pytest's own hooks
#: no longer say alone what the entries collect.
CHECK_PLUGIN = """
import pytest

class CheckItem(pytest.Item):
    def runtest(self):
        assert self.path.read_text().strip() == "ok"

class CheckFile(pytest.File):
    def collect(self):
        yield CheckItem.from_parent(self, name="check")

def pytest_collect_file(file_path, parent):
    if file_path.name.endswith(".check"):
        return CheckFile.from_parent(parent, path=file_path)
"""


def project(tmp_path, conftest: str | None = None):
    """A project whose ``py`` env runs ``python -m pytest`` with no path: the rootdir is
    collected whole (``.*`` in ``norecursedirs``, as by default)."""
    counter = tmp_path / "counter"
    files = {"README.md": "# proj\n", "CHANGES.md": "## 1.0\n", "tests/test_a.py": TEST}
    files["tests/data.json"] = "{}\n"
    if conftest:
        files["conftest.py"] = conftest
    setting = "\n".join(
        [
            "set_env =",
            f"{' ' * 20}PYTHONPATH={SITE}",
            f"{' ' * 20}PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
        ]
    )
    root = env_project(tmp_path, counter, "python -m pytest -q -p no:cacheprovider", files, setting)
    code, out = tox(root, "-e", "py")
    assert code == 0 and "1 passed" in out, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out and count(counter) == 1, out
    return root, counter


def test_a_leftover_and_docs_edits_replay_new_tests_rerun(tmp_path):
    root, counter = project(tmp_path)
    # A tool's leftovers (dot-named: pytest neither goes into such a folder nor collects
    # such a file) and edited docs at the root and in a collected folder: nothing re-runs.
    (root / ".coverage").write_text("data\n")
    (root / ".hypothesis").mkdir()
    (root / "tests" / ".benchmarks").mkdir()
    (root / "README.md").write_text("# proj\n\nA longer description.\n")
    (root / "CHANGES.md").write_text("## 1.1\n\n## 1.0\n")
    (root / "tests" / "data.json").write_text('{"a": 1}\n')
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out and count(counter) == 1, out
    # Any new entry not named with a dot counts (a folder pytest would go into, or a file).
    (root / "tests" / "more.json").write_text("{}\n")
    code, out = tox(root, "-e", "py")
    assert code == 0 and "1 passed" in out and count(counter) == 2, out
    # A new test file at the root: pytest collects it.
    (root / "test_new.py").write_text(TEST.replace("test_a", "test_new"))
    code, out = tox(root, "-e", "py")
    assert code == 0 and "2 passed" in out and count(counter) == 3, out
    # A new folder of tests inside a collected folder.
    (root / "tests" / "more").mkdir()
    (root / "tests" / "more" / "test_more.py").write_text(TEST.replace("test_a", "test_more"))
    code, out = tox(root, "-e", "py")
    assert code == 0 and "3 passed" in out and count(counter) == 4, out
    # A file pytest walked past that becomes a folder of tests: pytest does not stat a
    # file it collects nothing from, so only the folder's entries hold it, and a file
    # turned into a folder (same name) is a change of that entry.
    (root / "CHANGES.md").unlink()
    (root / "CHANGES.md").mkdir()
    (root / "CHANGES.md" / "test_hidden.py").write_text(TEST.replace("test_a", "test_hidden"))
    code, out = tox(root, "-e", "py")
    assert code == 0 and "4 passed" in out and count(counter) == 5, out
    # A doctest text file pytest's default glob (test*.txt) collects, failing.
    (root / "tests" / "testdoc.txt").write_text(">>> 1 + 1\n3\n")
    code, out = tox(root, "-e", "py")
    assert code != 0 and count(counter) == 6, out


def test_a_plugin_collecting_other_files_keeps_every_entry(tmp_path):
    root, counter = project(tmp_path, CHECK_PLUGIN)
    # A dot-named file the conftest's hook collects, failing.
    (root / ".extra.check").write_text("not ok\n")
    code, out = tox(root, "-e", "py")
    assert code != 0 and count(counter) == 2, out
    assert "directory gained entries: .extra.check" in out, out
