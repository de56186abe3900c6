"""The nox helper's ``session.run("python", "-m", "pytest", ...)``: an edit of a file
pytest's collection only walks past (``README.md``, ``CHANGES.md``) replays it; an edit of
a test or of the code it imports runs it again. Real nox, real pytest."""

from __future__ import annotations

import sys

from conftest import write_tree
from test_nox import counter, environ, nox, pytestmark  # noqa: F401  (the same skips)

NOXFILE = f"""
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def tests(session):
        session.run({sys.executable!r}, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "tests", external=True, env={{"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}})
"""
TEST = """
    from shapes import area

    def test_area():
        open("../counter", "a").write("x\\n")
        assert area(2) == 4
"""


def test_docs_edits_replay_code_edits_rerun(tmp_path):
    # The session's pytest runs without the host's plugins (its env=): pytest-benchmark's
    # ``.benchmarks``, made in the folder pytest's import system listed, would make the
    # second run run again (``tests/test_own_leftovers.py``).
    root = write_tree(
        tmp_path / "proj",
        {
            "noxfile.py": NOXFILE,
            "README.md": "# proj\n",
            "CHANGES.md": "## 1.0\n",
            "shapes.py": "def area(n):\n    return n * n\n",
            "tests/test_a.py": TEST,
        },
    )
    count = tmp_path / "counter"
    code, out = nox(root, "-s", "tests")
    assert code == 0 and "1 passed" in out and counter(count) == 1, out
    code, out = nox(root, "-s", "tests")
    assert code == 0 and "up to date" in out and counter(count) == 1, out
    (root / "README.md").write_text("# proj\n\nA much longer description.\n")
    (root / "CHANGES.md").write_text("## 1.1\n\n- more\n\n## 1.0\n")
    code, out = nox(root, "-s", "tests")
    assert code == 0 and "up to date" in out and counter(count) == 1, out
    write_tree(root, {"tests/test_a.py": TEST.replace("area(2) == 4", "area(3) == 9")})
    code, out = nox(root, "-s", "tests")
    assert code == 0 and counter(count) == 2, out
    (root / "shapes.py").write_text("def area(n):\n    return n * 2 + 1\n")
    code, out = nox(root, "-s", "tests")
    assert code != 0 and counter(count) == 3, out
