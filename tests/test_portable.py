"""Portable records (``memotest/world/roots.py``): a copy of a project at another path, with its
``.memotest/`` copied too, replays every target whose files are the same."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree

#: A file outside every root that the targets read: it stays absolute in the records.
SYSTEM_INPUT = os.path.realpath(os.__file__)


def _project(base: Path) -> tuple[Path, Path]:
    """A project at ``base/a/proj`` and a venv-like root outside it at ``base/a/venv``."""
    venv = write_tree(base / "a" / "venv", {"lib/helper.py": "VALUE = 1\n"})
    proj = write_tree(
        base / "a" / "proj",
        {
            "memotest.toml": f"""
                [settings]
                roots = {{venv = "$MY_VENV"}}
                pass_env = ["PATH", "MY_VENV"]

                [targets.one]
                command = "{sys.executable} one.py"

                [targets.two]
                command = "{sys.executable} sub/two.py data.txt"
                cwd = "sub"

                [targets.venv]
                command = "{sys.executable} use_venv.py"

                [targets.writer]
                command = "{sys.executable} writer.py"
                outputs = ["out.txt"]
            """,
            "one.py": f"open({SYSTEM_INPUT!r}).read(); print(open('input.txt').read())\n",
            "input.txt": "hello\n",
            "sub/data.txt": "data\n",
            "sub/sub/two.py": "import sys; print(open(sys.argv[1]).read())\n",
            "use_venv.py": "import os, sys\n"
            "sys.path.insert(0, os.environ['MY_VENV'] + '/lib')\n"
            "import helper\nassert helper.VALUE == 1\n",
            "writer.py": "open('out.txt', 'w').write('written')\n",
        },
    )
    return proj, venv


def _env(venv: Path) -> dict[str, str]:
    return dict(os.environ, MY_VENV=str(venv), PATH=f"{venv}/bin:{os.environ['PATH']}")


ALL = {"one": "passed", "two": "passed", "venv": "passed", "writer": "passed"}
CACHED = dict.fromkeys(ALL, "cached")


def test_a_copy_at_another_path_replays(tmp_path: Path) -> None:
    proj, venv = _project(tmp_path)
    assert build_statuses(proj, env=_env(venv))[2] == ALL
    assert build_statuses(proj, env=_env(venv))[2] == CACHED
    # The whole machine's folder (project, store, venv root) at another path.
    shutil.copytree(tmp_path / "a", tmp_path / "b", symlinks=True)
    proj_b, venv_b = tmp_path / "b" / "proj", tmp_path / "b" / "venv"
    _, out, statuses = build_statuses(proj_b, "-v", env=_env(venv_b))
    assert statuses == CACHED, out
    assert (proj_b / "out.txt").read_text() == "written"
    # An edit in the copy re-runs that target there, and the original still replays.
    (proj_b / "input.txt").write_text("changed\n")
    # Another size too: Python trusts a .pyc whose source has the same size and mtime
    # second, and the copy keeps the first run's .pyc (a flake under load, not memotest's).
    (venv_b / "lib" / "helper.py").write_text("VALUE = 2  # edited\n")
    assert build_statuses(proj_b, env=_env(venv_b))[2] == {
        **CACHED,
        "one": "passed",
        "venv": "failed",
    }
    assert build_statuses(proj, env=_env(venv))[2] == CACHED
    # The copy's store names no path of the original (nor its venv).
    db = (proj_b / ".memotest" / "db.sqlite").read_bytes()
    assert str(tmp_path / "a").encode() not in db


def test_a_file_outside_the_roots_stays_absolute(tmp_path: Path) -> None:
    """``one`` read the system Python's ``os.py``: the copy checks that very file."""
    proj, venv = _project(tmp_path)
    assert build_statuses(proj, env=_env(venv))[2] == ALL
    db = (proj / ".memotest" / "db.sqlite").read_bytes()
    assert SYSTEM_INPUT.encode() in db
    assert b"@project/input.txt" in db


def test_a_root_that_is_not_there_is_a_load_error(tmp_path: Path) -> None:
    proj, venv = _project(tmp_path)
    proc = memotest("build", cwd=proj, env=dict(_env(venv), MY_VENV=str(tmp_path / "nowhere")))
    assert proc.returncode == 2
    assert f"{proj / 'memotest.toml'}:3:" in proc.stderr.decode()
    proc = memotest("build", cwd=proj, env=dict(_env(venv), MY_VENV="/"))
    assert proc.returncode == 2 and "is /" in proc.stderr.decode()
    env = _env(venv)
    del env["MY_VENV"]
    proc = memotest("build", cwd=proj, env=env)
    assert proc.returncode == 2 and "MY_VENV" in proc.stderr.decode()


@pytest.mark.parametrize("prefix", ["/tmp/x", "/tmp/xy"])
def test_roots_both_ways(prefix: str, tmp_path: Path) -> None:
    from memotest.world.roots import Roots

    venv = tmp_path / "proj" / ".venv"
    venv.mkdir(parents=True)
    roots = Roots(tmp_path / "proj", {"venv": str(venv)})
    p = str(tmp_path / "proj")
    assert roots.portable(p + "/a.py") == "@project/a.py"
    assert roots.portable(str(venv) + "/lib/x.py") == "@venv/lib/x.py"  # the deepest wins
    assert roots.portable(p + "2/a.py") == p + "2/a.py"
    assert roots.portable("@odd") == "@@odd"
    for path in (p, p + "/a", str(venv), "/usr/lib/x", "@odd", prefix):
        assert roots.local(roots.portable(path)) == path
    assert roots.portable_text(f"PATH={venv}/bin:{p}2/bin:/usr/bin @x") == (
        f"PATH=@venv/bin:{p}2/bin:/usr/bin @@x"
    )


def test_sqlite_reads_paths_back_as_local_does(tmp_path: Path) -> None:
    import sqlite3

    from memotest.world.roots import Roots

    (tmp_path / "p" / "v").mkdir(parents=True)
    roots = Roots(tmp_path / "p", {"v": str(tmp_path / "p" / "v")})
    stored = ["@project", "@project/a", "@v/b", "@@x", "@other/y", "/usr/lib/z", b"@v/\xff"]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(path)")
    conn.executemany("INSERT INTO t VALUES (?)", [(s,) for s in stored])
    sql, params = roots.sql_local("SELECT {path} FROM t", "path")
    got = [r[0] for r in conn.execute(sql, params)]
    for s, g in zip(stored, got, strict=True):
        if isinstance(s, str) and not s.startswith(("@@", "@other")):
            assert g == roots.local(s)
        else:  # left as stored, for Roots.local
            assert g == s


def _elsewhere_project(base: Path, data: str) -> Path:
    """A project at ``base/proj`` whose target reads ``$DATA_DIR/data.txt``, and beside it
    ``base/elsewhere/data.txt`` holding ``data``."""
    write_tree(base / "elsewhere", {"data.txt": data})
    write_tree(base / "proj" / "sub", {"data.txt": "inside\n"})
    return write_tree(
        base / "proj",
        {
            "memotest.toml": """
                [settings]
                pass_env = ["PATH", "DATA_DIR"]

                [targets.t]
                command = "sh -c 'cat \\"$DATA_DIR/data.txt\\"'"
            """,
        },
    )


@pytest.mark.parametrize("where", ["x/y", "b"], ids=["another-depth", "same-depth"])
def test_a_variable_leaving_the_project_is_keyed_where_it_leads(tmp_path: Path, where: str):
    """``DATA_DIR=$PWD/../elsewhere`` was keyed ``@project/../elsewhere``: a copy of the
    project whose ``../elsewhere`` holds other data replayed the original's result (its
    record names ``/.../a/elsewhere/data.txt``, which still holds). ``..`` is resolved
    before a path is taken under a root: the value is outside the project, absolute."""
    proj = _elsewhere_project(tmp_path / "a", "one\n")
    env = dict(os.environ, DATA_DIR=f"{proj}/../elsewhere")
    assert build_statuses(proj, env=env)[2] == {"t": "passed"}
    assert build_statuses(proj, env=env)[2] == {"t": "cached"}
    copy = tmp_path / where / "proj"
    shutil.copytree(proj, copy, symlinks=True)
    write_tree(copy.parent / "elsewhere", {"data.txt": "two\n"})
    _rc, out, statuses = build_statuses(copy, "-v", env=dict(env, DATA_DIR=f"{copy}/../elsewhere"))
    assert statuses == {"t": "passed"}, out
    assert build_statuses(proj, env=env)[2] == {"t": "cached"}  # the original still replays


def test_a_variable_with_dotdot_inside_the_project_still_travels(tmp_path: Path):
    """``$PWD/sub/../sub`` stays inside the project (``sub`` is a folder, not a link):
    ``@project/sub``, and a copy at another depth replays."""
    proj = _elsewhere_project(tmp_path / "a", "one\n")
    env = dict(os.environ, DATA_DIR=f"{proj}/sub/../sub")
    assert build_statuses(proj, env=env)[2] == {"t": "passed"}
    copy = tmp_path / "x" / "y" / "proj"
    shutil.copytree(proj, copy, symlinks=True)
    _rc, out, statuses = build_statuses(copy, env=dict(env, DATA_DIR=f"{copy}/sub/../sub"))
    assert statuses == {"t": "cached"}, out


def test_dotdot_after_a_symbolic_link_is_not_resolved_as_text(tmp_path: Path):
    from memotest.world.roots import Roots, sound_normpath

    (tmp_path / "p" / "sub").mkdir(parents=True)
    (tmp_path / "far" / "in").mkdir(parents=True)
    (tmp_path / "p" / "link").symlink_to(tmp_path / "far" / "in")
    p = str(tmp_path / "p")
    assert sound_normpath(p + "/sub/../x") == p + "/x"
    assert sound_normpath(p + "/link/../x") is None  # the kernel: far/x
    assert sound_normpath(p + "/nothing/../x") is None  # the kernel: ENOENT
    roots = Roots(p)
    assert roots.portable_text(f"A={p}/sub/./../x") == "A=@project/x"
    assert roots.portable_text(f"A={p}/link/../x") == f"A={p}/link/../x"  # as written
    assert roots.portable_text(f"A={p}/../q:{p}/b") == f"A={tmp_path}/q:@project/b"
