"""What warm workers preload (``memotest/tracer/warm/preload.py``): learned from real forked
runs of real pytest, and refused when importing it early would change a run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conftest import build_statuses, plugin_site, write_tree

from memotest.tracer.warm.preload import HINTS, PreloadBook
from memotest.tracer.warm.reading import marked

PY = sys.executable

# colorsys: a standard module that neither pytest nor memotest imports.
IMPORTS_COLORSYS = "import colorsys\nimport mypkg\n\ndef test_uses():\n    assert mypkg.X\n"
PRELOADED = """
import sys

SEEN = "colorsys" in sys.modules  # at collection, before this file imports anything

def test_seen_at_collection():
    assert SEEN
"""


def hints(proj: Path) -> dict:
    return json.loads((proj / HINTS).read_text())["interpreters"][PY]


def write_hints(proj: Path, modules: list[str], never: list[str] = ()) -> None:
    (proj / HINTS).parent.mkdir(exist_ok=True)
    data = {"version": 1, "interpreters": {PY: {"modules": modules, "never": list(never)}}}
    (proj / HINTS).write_text(json.dumps(data))


def test_the_next_worker_preloads_what_the_runs_imported_but_the_projects_own(tmp_path):
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "mypkg/__init__.py": "X = 1\n",
            "tests/test_a.py": IMPORTS_COLORSYS,
            "tests/test_b.py": PRELOADED,
        },
    )
    code, out, st = build_statuses(proj, "--pytest")
    # The first build's worker imported pytest only.
    assert st == {"pytest:tests/test_a.py": "passed", "pytest:tests/test_b.py": "failed"}, out
    learned = hints(proj)["modules"]
    assert "colorsys" in learned
    assert not [m for m in learned if m.split(".")[0] in ("mypkg", "tests", "test_a")]
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest")
    if "a warm worker could not be used" in out:
        # refused (a busy machine: its start-up not traced completely): the runs went fresh,
        # as faithful, so without the preload; the next build's worker has it
        code, out, st = build_statuses(proj, "-v", "--force", "--pytest")
    assert code == 0, out
    assert st == {"pytest:tests/test_a.py": "passed", "pytest:tests/test_b.py": "passed"}, out
    code, out, st = build_statuses(proj, "--force", "--no-preload", "--pytest")
    assert code == 1
    assert st["pytest:tests/test_b.py"] == "failed", out


def test_a_package_whose_import_warns_is_left_out_and_never_preloaded(tmp_path):
    # Importing warnpkg.sub runs warnpkg/__init__.py, which warns (as eventlet does): the
    # whole package is left out at once, not one submodule per restarted worker.
    site = write_tree(
        tmp_path / "site",
        {
            "warnpkg/__init__.py": "import warnings\nwarnings.warn('old', DeprecationWarning)\n",
            "warnpkg/sub.py": "",
            "warnpkg/other.py": "",
        },
    )
    test = """
        import pytest

        def test_warns_on_first_import():
            with pytest.warns(DeprecationWarning, match="old"):
                import warnpkg.sub
    """
    proj = write_tree(
        tmp_path / "proj",
        {"pytest.ini": "[pytest]\n", "tests/test_w.py": test, "tests/test_b.py": PRELOADED},
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    build_statuses(proj, "--pytest", env=env)  # a first build makes what plugins make
    write_hints(proj, ["warnpkg.sub", "warnpkg.other", "colorsys"])
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert code == 0
    assert st == {"pytest:tests/test_w.py": "passed", "pytest:tests/test_b.py": "passed"}, out
    assert "a warm worker left out warnpkg.sub (its import warned: DeprecationWarning)" in out
    assert "left out warnpkg.other" not in out
    assert "warnpkg" in hints(proj)["never"]


def test_a_module_that_imports_multiprocessing_is_never_preloaded(tmp_path):
    """structlog's ``CallsiteParameterAdder`` names the process only once
    ``multiprocessing`` is imported: a run that never imports it must not find it
    imported (structlog's ``test_processors.py`` passed forked, failed fresh). The module
    that imported it is left out; the others are still preloaded."""
    site = write_tree(tmp_path / "site", {"usesmp.py": "import multiprocessing\n"})
    test = """
        import sys

        AT_COLLECTION = set(sys.modules)

        def test_as_fresh():
            assert "multiprocessing" not in AT_COLLECTION and "colorsys" in AT_COLLECTION
    """
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", "tests/test_p.py": test})
    env = dict(os.environ, PYTHONPATH=str(site))
    write_hints(proj, ["usesmp", "colorsys"])
    _, out, st = build_statuses(proj, "-v", "--pytest", env=env)
    assert st == {"pytest:tests/test_p.py": "passed"}, out
    assert "left out usesmp (its import imported multiprocessing" in out
    assert "usesmp" in hints(proj)["never"]


def test_a_preloaded_module_pytest_wants_to_rewrite_makes_the_run_start_fresh(tmp_path):
    """An entry-point plugin the worker preloaded could not be rewritten: pytest would warn
    (here, an error) and its failed asserts would say less. The run starts again, fresh."""
    site = plugin_site(tmp_path / "site")
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\nfilterwarnings = error\n",
            "tests/test_a.py": "def test_plugged(plugged):\n    pass\n",
        },
    )
    # Plain workers: a configured one (the default) prepares pytest with the plugin
    # preloaded, and where pytest's rewrite warning is an error the preparation fails and
    # every run starts fresh anyway ("a warm worker could not be used"; which of the two
    # comes first depends on the plugins installed beside pytest).
    env = dict(os.environ, PYTHONPATH=str(site), MEMOTEST_PYTEST_CONFIGURED="0")
    build_statuses(proj, "--pytest", env=env)
    write_hints(proj, ["myplug"])
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert code == 1
    assert st == {"pytest:tests/test_a.py": "failed"}, out
    # The first run in that worker (the memoized collection, or the test file's) starts again.
    assert "ran again, fresh: the worker had preloaded myplug" in out
    assert "already imported" not in out
    assert "assert 2 == 3" in out  # rewritten: the values are shown
    assert "myplug" in hints(proj)["fresh"]  # imported under pytest's rewriting only


def test_marked_takes_a_name_or_a_package_above_it():
    marks = {"pkg", "other.sub"}
    assert marked("pkg", marks) and marked("pkg.mod", marks) and marked("other.sub.x", marks)
    assert not marked("pkgx", marks) and not marked("other", marks)


def test_the_book_leaves_out_the_project_the_denied_and_the_marked(tmp_path):
    write_tree(tmp_path, {"src/proj/__init__.py": "", "tool.py": "", ".memotest/x": ""})
    book = PreloadBook()
    report = {"modules": ["proj.core", "tool", "json", "readline", "plug.x", "own"]}
    book.learn(str(tmp_path), PY, {**report, "marked": ["plug"]})
    assert book.modules_for(str(tmp_path), PY, ("own",)) == ("json",)
    # What pytest marked is imported only after a configured worker's preparation.
    assert book.prepared_for(str(tmp_path), PY, ("own",)) == ("plug.x",)
    book.refuse(str(tmp_path), PY, ["plug.x"])
    assert book.prepared_for(str(tmp_path), PY, ("own",)) == ()


def test_what_an_import_hook_loaded_is_learned_only_if_marked(tmp_path):
    """pytest's rewriting loads what it marked: learned for a configured worker to import
    under the same hook; what another import hook loaded is never preloaded."""
    book = PreloadBook()
    report = {"modules": ["json"], "hooked": ["hypo.core", "instrumented"], "marked": ["hypo"]}
    book.learn(str(tmp_path), PY, report)
    assert book.prepared_for(str(tmp_path), PY, ()) == ("hypo.core",)
    assert book.modules_for(str(tmp_path), PY, ()) == ("json",)


def test_the_book_merges_with_what_another_build_saved(tmp_path):
    (tmp_path / ".memotest").mkdir()
    first, second = PreloadBook(), PreloadBook()
    first.modules_for(str(tmp_path), PY, ())  # read before the other build saves
    second.learn(str(tmp_path), PY, {"modules": ["json"], "marked": ["plug"]})
    second.save()
    first.learn(str(tmp_path), PY, {"modules": ["csv"], "marked": []})
    first.refuse(str(tmp_path), PY, ["warnmod"])
    first.save()
    saved = hints(tmp_path)
    assert saved["modules"] == ["json", "csv"]
    assert saved["never"] == ["warnmod"]
    assert saved["fresh"] == ["plug"]


def test_nothing_is_written_where_there_is_no_store(tmp_path):
    book = PreloadBook()
    book.learn(str(tmp_path), PY, {"modules": ["json"], "marked": []})
    book.save()
    assert not (tmp_path / ".memotest").exists()


def test_preloading_stops_when_the_runs_keep_replacing_the_worker(tmp_path):
    # Each run rewrites a module the worker imported (here sitecustomize, read at start-up):
    # the next run finds the worker changed and starts fresh, the one after that needs a
    # new worker, which would preload all over again. At -j1, six targets make two.
    site = plugin_site(tmp_path / "site")
    touch = f"""
        import time

        def test_touch():
            with open({str(site / "sitecustomize.py")!r}, "a") as f:
                f.write("\\n")
            time.sleep(0.3)  # long before the next worker starts
    """
    files = {f"tests/test_{n}.py": touch for n in "abcdef"}
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", **files})
    env = dict(os.environ, PYTHONPATH=str(site))
    code, out, st = build_statuses(proj, "-v", "-j1", "--pytest", env=env)
    assert code == 0 and set(st.values()) == {"passed"}, out
    assert "warm workers replaced too often: no more preloading" in out


def test_a_module_whose_import_reads_the_projects_files_is_never_preloaded(tmp_path):
    # Preloaded, it would make every target depend on tox.ini (as hacking does).
    site = write_tree(
        tmp_path / "site", {"readsconf.py": "with open('tox.ini') as f:\n    CONF = f.read()\n"}
    )
    test = "import readsconf\n\ndef test_conf():\n    assert readsconf.CONF\n"
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "tox.ini": "[tox]\n",
            "tests/test_a.py": test,
            "tests/test_b.py": PRELOADED,
        },
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    build_statuses(proj, "--pytest", env=env)
    write_hints(proj, ["readsconf", "colorsys"])
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert code == 0, out
    assert st == {"pytest:tests/test_a.py": "passed", "pytest:tests/test_b.py": "passed"}, out
    assert f"a warm worker left out readsconf (its import looked at {proj / 'tox.ini'})" in out
    assert "readsconf" in hints(proj)["never"]
    # tox.ini is an input of the target that imports readsconf only.
    (proj / "tox.ini").write_text("[tox]\nenvlist = py\n")
    code, out, st = build_statuses(proj, "--pytest", env=env)
    assert st == {"pytest:tests/test_a.py": "passed", "pytest:tests/test_b.py": "cached"}, out


def test_after_two_refusals_the_worker_preloads_nothing_but_is_still_used(tmp_path):
    warns = "import warnings\nwarnings.warn('old', DeprecationWarning)\n"
    site = write_tree(tmp_path / "site", {f"warn{n}.py": warns for n in "123"})
    forked = """
        import os

        def test_forked_from_the_worker():
            with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
                assert b"memotest_shim_retarget" in f.read()
    """
    proj = write_tree(tmp_path / "proj", {"pytest.ini": "[pytest]\n", "tests/test_f.py": forked})
    # One worker: a configured one per folder of test files refuses on its own account.
    env = dict(os.environ, PYTHONPATH=str(site), MEMOTEST_PYTEST_CONFIGURED="0")
    build_statuses(proj, "--pytest", env=env)
    write_hints(proj, ["warn1", "warn2", "warn3"])
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert code == 0 and st == {"pytest:tests/test_f.py": "passed"}, out
    assert "left out warn1" in out and "left out warn2" in out
    assert "left out warn3" not in out and "could not be used" not in out
    assert {"warn1", "warn2"} <= set(hints(proj)["never"])
    assert "warn3" not in hints(proj)["never"]


def test_a_venv_inside_the_project_is_the_interpreters_not_the_projects(tmp_path):
    # Python looks at its prefix (here proj/.venv) while importing: that is not a file of
    # the project, and the modules that do it are preloaded all the same.
    import sysconfig
    import venv

    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": "import colorsys, zoneinfo\n\ndef test_a():\n    pass\n",
            "tests/test_b.py": PRELOADED,
        },
    )
    venv.create(proj / ".venv", with_pip=False)
    site = next((proj / ".venv").glob("lib/python*/site-packages"))
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # for pytest
    python = str(proj / ".venv" / "bin" / "python")
    build_statuses(proj, "--pytest-python", python, "--pytest")
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest-python", python, "--pytest")
    assert code == 0 and set(st.values()) == {"passed"}, out
    assert "left out" not in out


def test_a_preloaded_module_the_tests_folder_shadows_makes_the_run_start_fresh(tmp_path):
    # pytest puts tests/sub first on sys.path: there, `import helpers` is the project's.
    site = write_tree(tmp_path / "site", {"helpers.py": "WHERE = 'site'\n"})
    test = "import helpers\n\ndef test_helpers():\n    assert helpers.WHERE == 'project'\n"
    proj = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "tests/sub/helpers.py": "WHERE = 'project'\n",
            "tests/sub/test_x.py": test,
        },
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    build_statuses(proj, "--pytest", env=env)
    write_hints(proj, ["helpers"])
    code, out, st = build_statuses(proj, "-v", "--force", "--pytest", env=env)
    assert code == 0 and st == {"pytest:tests/sub/test_x.py": "passed"}, out
    assert "pytest:tests/sub/test_x.py ran again, fresh: the worker had preloaded helpers" in out
    assert "helpers" in hints(proj)["never"]
