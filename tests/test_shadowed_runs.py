"""A preloaded package that a run's ``sys.path`` finds elsewhere (``shadowed``), when the
worker found where its own ``sys.path`` finds each one before forking its runs
(``memotest/worker/preload.py``, ``remember_shadowed``): each run searches again only what
it added, and what the worker searched only when a folder or file it looked at changed.

Red team of that narrowing: each test makes a run's ``sys.path`` find ``helpers``
elsewhere than the worker's preloaded one in another way, and the run must start again as
a fresh process. The trees are dated an hour back: a path changed in the last seconds
before the worker looked makes it keep nothing (its stat could not tell a later change),
and the runs would then search everything again, as before.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from conftest import build_statuses, write_tree

from memotest.tracer.warm.preload import HINTS

SITE_HELPERS = {"helpers.py": "WHERE = 'site'\n"}


def preload_helpers(proj: Path) -> None:
    """Has the workers preload ``helpers`` (as if earlier runs had imported it)."""
    (proj / HINTS).parent.mkdir(exist_ok=True)
    data = {"version": 1, "interpreters": {sys.executable: {"modules": ["helpers"]}}}
    (proj / HINTS).write_text(json.dumps(data))


def date_back(*roots: Path) -> None:
    """Every folder and file under ``roots`` modified an hour ago."""
    then = time.time() - 3600
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                os.utime(os.path.join(folder, name), (then, then))
            os.utime(folder, (then, then))


def build_shadowed(
    tmp_path: Path, tree: dict[str, str], made: str = "", portion: bool = False
) -> tuple[str, dict]:
    """Builds the project of ``tree`` twice: once to make what a build makes in it, then
    (``made``, what the run made, removed: a path under ``tmp_path``) with ``helpers``
    preloaded from a folder of ``sys.path`` (``site``; ``portion``: after one where
    ``helpers/`` is a namespace portion), the trees dated back: the output and the book of
    the preloads."""
    site = write_tree(tmp_path / "site", SITE_HELPERS)
    first = write_tree(tmp_path / "first", {"helpers/data.txt": ""}) if portion else None
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", **tree})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, filter(None, [first, site]))))
    code, out, st = build_statuses(proj, "--pytest", env=env)
    assert code == 0 and set(st.values()) == {"passed"}, out
    if made:
        (tmp_path / made).unlink()
    preload_helpers(proj)
    date_back(*filter(None, [site, first, proj]))
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert code == 0 and set(st.values()) == {"passed"}, out
    book = json.loads((proj / HINTS).read_text())["interpreters"][sys.executable]
    return out, book


def test_a_folder_the_run_put_first_shadows_a_preloaded_package(tmp_path):
    # pytest puts tests/sub first on sys.path: there, `import helpers` is the project's.
    test = "import helpers\n\ndef test_helpers():\n    assert helpers.WHERE == 'project'\n"
    tree = {"tests/sub/helpers.py": "WHERE = 'project'\n", "tests/sub/test_x.py": test}
    out, hints = build_shadowed(tmp_path, tree)
    assert "pytest:tests/sub/test_x.py ran again, fresh: the worker had preloaded helpers" in out
    assert "helpers" in hints.get("never", []), out


def test_a_module_the_run_adds_to_a_folder_the_worker_searched(tmp_path):
    # The project's folder is first on the worker's sys.path too: the worker found no
    # helpers there, the run writes one.
    test = (
        "from pathlib import Path\n\n"
        "def test_writes():\n    Path('helpers.py').write_text('X = 1')\n"
    )
    out, hints = build_shadowed(tmp_path, {"tests/test_w.py": test}, "proj/helpers.py")
    assert "pytest:tests/test_w.py ran again, fresh: the worker had preloaded helpers" in out
    assert "helpers" in hints.get("never", []), out


def test_a_namespace_portion_the_run_makes_a_package(tmp_path):
    # helpers/ without __init__.py in the first folder of PYTHONPATH: a namespace portion
    # the search passes over for the next one's helpers.py; the run makes it a package,
    # which the search then finds first. The folder itself does not change.
    test = (
        "import os\nfrom pathlib import Path\n\n"
        "def test_writes():\n"
        "    first = Path(os.environ['PYTHONPATH'].split(os.pathsep)[0])\n"
        "    (first / 'helpers' / '__init__.py').write_text('X = 1')\n"
    )
    tree = {"tests/test_w.py": test}
    out, hints = build_shadowed(tmp_path, tree, "first/helpers/__init__.py", portion=True)
    assert "pytest:tests/test_w.py ran again, fresh: the worker had preloaded helpers" in out
    assert "helpers" in hints.get("never", []), out
