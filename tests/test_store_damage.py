"""A damaged store never yields a hit, never prints a traceback, and heals.

Each case gets a small project whose store replays (built once per test process, its
store copied back for each case), damages its ``.memotest/`` the way a disk, a crash or a
careless user does, and then checks, with the real command line: a build says
what it set aside (one line), runs the target (no hit from a damaged store) and the next
build replays it; the read-only commands say what is wrong and how to fix it (exit 2);
``clean`` always works.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree

from memotest.memo import run_memoized
from memotest.model import Target

TOML = """
[targets.a]
command = "cat in.txt"
[targets.b]
command = "sh -c 'cat in.txt > out.txt'"
outputs = ["out.txt"]
"""


def _blobs(store: Path) -> list[Path]:
    return [p for p in (store / "cas").rglob("*") if p.is_file()]


def _db_random(s: Path) -> None:
    db = s / "db.sqlite"
    db.write_bytes(os.urandom(db.stat().st_size))


def _db_truncated(s: Path) -> None:
    with open(s / "db.sqlite", "r+b") as f:
        f.truncate(1000)


def _db_garbage_pages(s: Path) -> None:
    db = s / "db.sqlite"
    size = db.stat().st_size
    with open(db, "r+b") as f:  # page 1 (header and schema) intact, the rest garbage
        f.seek(4096)
        f.write(os.urandom(size - 4096))


def _db_folder(s: Path) -> None:
    (s / "db.sqlite").unlink()
    (s / "db.sqlite").mkdir()
    (s / "db.sqlite" / "x").write_text("x")


def _wal_folder(s: Path) -> None:
    (s / "db.sqlite-wal").mkdir()


def _wal_garbage(s: Path) -> None:
    (s / "db.sqlite-wal").write_bytes(os.urandom(9000))


def _future_schema(s: Path) -> None:
    with sqlite3.connect(s / "db.sqlite") as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    conn.close()


def _paths_nowhere(s: Path) -> None:
    with sqlite3.connect(s / "db.sqlite") as conn:
        conn.execute("DELETE FROM paths")
    conn.close()


def _records_garbled(s: Path) -> None:
    with sqlite3.connect(s / "db.sqlite") as conn:
        conn.execute("UPDATE records SET inputs = x'00112233', outputs = '{'")
    conn.close()


def _blobs_emptied(s: Path) -> None:
    for b in _blobs(s):
        b.write_bytes(b"")


def _blobs_garbled(s: Path) -> None:
    for b in _blobs(s):
        data = bytearray(b.read_bytes())
        data[-1] ^= 0x55
        b.write_bytes(bytes(data))


def _blobs_cut_short(s: Path) -> None:
    """What a power loss may leave of blobs written but never synced (``blobs.py``)."""
    for b in _blobs(s):
        data = b.read_bytes()
        b.write_bytes(data[: len(data) // 2])


def _blobs_gone(s: Path) -> None:
    for b in _blobs(s):
        b.unlink()


def _store_file(s: Path) -> None:
    shutil.rmtree(s)
    s.write_text("not a store")


def _store_dangling(s: Path) -> None:
    shutil.rmtree(s)
    s.symlink_to(s.parent / "nowhere")


def _cas_file(s: Path) -> None:
    shutil.rmtree(s / "cas")
    (s / "cas").write_text("not a folder")


def _cas_dangling(s: Path) -> None:
    shutil.rmtree(s / "cas")
    (s / "cas").symlink_to(s / "nowhere")


def _cas_subfolder_file(s: Path) -> None:
    for sub in (s / "cas").iterdir():
        shutil.rmtree(sub)
        sub.write_text("x")


def _lock_folder(s: Path) -> None:
    (s / "lock").unlink()
    (s / "lock").mkdir()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "db-random": _db_random,
    "db-truncated": _db_truncated,
    "db-garbage-pages": _db_garbage_pages,
    "db-folder": _db_folder,
    "wal-folder": _wal_folder,
    "wal-garbage": _wal_garbage,
    "future-schema": _future_schema,
    "paths-nowhere": _paths_nowhere,
    "records-garbled": _records_garbled,
    "blobs-emptied": _blobs_emptied,
    "blobs-garbled": _blobs_garbled,
    "blobs-cut-short": _blobs_cut_short,
    "blobs-gone": _blobs_gone,
    "store-file": _store_file,
    "store-dangling-symlink": _store_dangling,
    "cas-file": _cas_file,
    "cas-dangling-symlink": _cas_dangling,
    "cas-subfolder-file": _cas_subfolder_file,
    "lock-folder": _lock_folder,
}

#: Damage every read-only command is sure to meet (the others may go unseen by one).
SURE = [
    "db-random",
    "db-folder",
    "store-file",
    "store-dangling-symlink",
    "cas-file",
    "cas-dangling-symlink",
]

#: Damage after which the store may rightly still replay (nothing recorded was lost).
HARMLESS = {"wal-garbage", "lock-folder", "cas-subfolder-file"}


def _aged(root: Path) -> Path:
    """``root`` with its files an hour old (never racily clean)."""
    for p in root.iterdir():
        os.utime(p, (p.stat().st_mtime - 3600,) * 2)
    time.sleep(1.0)  # and their ctime older than the first run's start
    return root


#: The project's own files: everything else in it is the store or what a case left.
PROJECT = {"memotest.toml": TOML, "in.txt": "hello\n"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The project, built twice (the second build replays), once per test process, and a
    copy of its store as it was then: each case gets that store back (:func:`project`)
    instead of two builds of its own."""
    root = _aged(write_tree(tmp_path_factory.mktemp("damage") / "p", PROJECT))
    code, out, st = build_statuses(root)
    assert code == 0 and st == {"a": "passed", "b": "passed"}, out
    code, out, st = build_statuses(root)
    assert st == {"a": "cached", "b": "cached"}, out
    saved = root.parent / "store"
    shutil.copytree(root / ".memotest", saved, symlinks=True)
    return root, saved


@pytest.fixture
def project(built: tuple[Path, Path]) -> Path:
    """The built project with its replaying store back: whatever a case damaged, set
    aside or left (a dangling link's target, ``out.txt``) is removed first. The project's
    own files are never touched, so they keep their age."""
    root, saved = built
    for entry in root.iterdir():
        if entry.name in PROJECT:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.copytree(saved, root / ".memotest", symlinks=True)
    (root / "out.txt").write_text("hello\n")
    return root


def test_the_store_given_back_replays(project: Path) -> None:
    """What makes every case below able to fail: the store it gets replays."""
    code, out, st = build_statuses(project)
    assert code == 0 and st == {"a": "cached", "b": "cached"}, out


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_build_on_a_damaged_store_runs_the_targets_and_heals(project: Path, case: str) -> None:
    root = project
    DAMAGE[case](root / ".memotest")
    code, out, st = build_statuses(root)
    assert "Traceback" not in out, out
    assert code == 0, out
    if case not in HARMLESS:
        assert st == {"a": "passed", "b": "passed"}, out  # never a hit from a damaged store
    assert (root / "out.txt").read_text() == "hello\n"
    code, out, st = build_statuses(root)
    assert "Traceback" not in out and code == 0, out
    assert st == {"a": "cached", "b": "cached"}, out  # healed: the next build replays
    assert "damaged" not in out  # said once, when it was found


@pytest.mark.parametrize("case", ["db-random", "store-file", "cas-file", "blobs-garbled"])
def test_the_build_says_once_what_it_set_aside(project: Path, case: str) -> None:
    root = project
    DAMAGE[case](root / ".memotest")
    proc = memotest("build", cwd=root)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    said = [line for line in err.splitlines() if "damaged" in line]
    assert len(said) == 1, err
    if case != "blobs-garbled":
        assert "aside in" in said[0] and "damaged-" in said[0], said


@pytest.mark.parametrize("case", SURE)
@pytest.mark.parametrize("command", [["list"], ["show", "a"], ["explain", "a"], ["graph"]])
def test_read_only_commands_say_what_is_wrong(project: Path, case: str, command: list) -> None:
    root = project
    DAMAGE[case](root / ".memotest")
    proc = memotest(*command, cwd=root)
    err = proc.stderr.decode()
    assert proc.returncode == 2, (proc.stdout, err)
    assert "Traceback" not in err and "memotest clean" in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("case", ["blobs-garbled", "blobs-emptied"])
def test_show_log_of_a_damaged_blob_says_so(project: Path, case: str) -> None:
    root = project
    DAMAGE[case](root / ".memotest")
    proc = memotest("show", "a", "--log", cwd=root)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err and "memotest clean" in err, err


@pytest.mark.parametrize("case", list(DAMAGE))
def test_clean_always_works(project: Path, case: str) -> None:
    root = project
    DAMAGE[case](root / ".memotest")
    proc = memotest("clean", cwd=root)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert (
        not os.path.lexists(root / ".memotest")
        or not os.listdir(root / ".memotest")
        or {*os.listdir(root / ".memotest")} <= {"lock"}
    )
    code, out, st = build_statuses(root)
    assert code == 0 and st == {"a": "passed", "b": "passed"}, out


def _memo_target(root: Path) -> Target:
    code = "import pathlib; print(pathlib.Path('in.txt').read_text(), end='')"
    return Target(name="m", command=(sys.executable, "-c", code), cwd=str(root))


@pytest.mark.parametrize("case", ["db-random", "db-garbage-pages", "blobs-garbled", "store-file"])
def test_run_memoized_heals_a_damaged_store(tmp_path: Path, case: str) -> None:
    root = _aged(write_tree(tmp_path / "m", {"in.txt": "hi\n"}))
    first = run_memoized(_memo_target(root), root=root)
    assert first.status == "passed" and not first.cached and first.log == b"hi\n"
    assert run_memoized(_memo_target(root), root=root).cached
    DAMAGE[case](root / ".memotest")
    again = run_memoized(_memo_target(root), root=root)
    assert again.status == "passed" and not again.cached and again.log == b"hi\n"
    assert run_memoized(_memo_target(root), root=root).cached


def test_run_memoized_keeps_a_result_the_store_failed_to_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording fails after the command ran (a full disk): its result stands, not
    cached, with the reason; nothing raises, so no caller runs the command again."""
    from memotest.store import records

    def full(*args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    root = write_tree(tmp_path / "m", {"in.txt": "hi\n"})
    code = (
        "import pathlib; p = pathlib.Path('runs');"
        " p.write_text('x' + (p.read_text() if p.exists() else ''))"
    )
    t = Target(name="m", command=(sys.executable, "-c", code), cwd=str(root))
    monkeypatch.setattr(records, "insert", full)
    result = run_memoized(t, root=root)
    assert result.status == "passed" and not result.cached
    assert (root / "runs").read_text() == "x"  # ran once
    assert result.note and "not cached" in result.note and "full" in result.note, result


def test_a_pytest_file_whose_blobs_a_power_loss_spoiled_runs(tmp_path: Path) -> None:
    """Blobs are not synced (``memotest/store/blobs.py``): the record of a pytest file (its
    code records, listings, log, test results) that outlives its blobs is no hit. Both
    cases on one project: each damages the blobs of the record the build before wrote."""
    root = _aged(
        write_tree(
            tmp_path / "p",
            {
                "pytest.ini": "[pytest]\n",
                "lib.py": "def f():\n    return 1\n",
                "tests/test_a.py": "import lib\n\ndef test_f():\n    assert lib.f() == 1\n",
            },
        )
    )
    name = "pytest:tests/test_a.py"
    code, out, st = build_statuses(root, "--pytest")
    assert st == {name: "passed"}, out
    for case in ("blobs-cut-short", "blobs-gone"):
        assert _blobs(root / ".memotest"), case
        DAMAGE[case](root / ".memotest")
        code, out, st = build_statuses(root, "--pytest")
        assert "Traceback" not in out and code == 0, (case, out)
        assert st == {name: "passed"}, (case, out)  # ran: never a hit on what cannot be verified
        code, out, st = build_statuses(root, "--pytest")
        assert st == {name: "cached"}, (case, out)
