"""memotest-sh's replay fast path (the front, ``memotest_make/front/front.c``, reading the
stamps ``memotest_make/stamp.py`` writes): the attacks on it.

A stamp replays a line without the full check, by the stat signatures of what its replayed
run read: each test changes one thing a stamped line saw, in a way a stat fast path could
miss (same size, ``mtime`` set back), and the line must run again. Real make, real
memotest-sh processes; the inputs are aged past the racy window first (a stamp proves
nothing about a file changed in the same second).
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memotest_make import stamp
from test_make import make, runs, write

from memotest.check.keys import process_state
from memotest.world.fingerprint import RACY_WINDOW_NS

PY = sys.executable
AGE_S = RACY_WINDOW_NS / 1e9 + 0.2

COUNT = """
import os, sys
with open(sys.argv[1], "a") as f:
    f.write(sys.argv[2] + "\\n")
"""


FRONT = str(Path(PY).parent / "memotest-sh")


def test_the_fast_path_keys_everything_the_key_does(tmp_path):
    """Each part of the key's process state is in the front's context (a superset)."""
    ours = subprocess.run(
        [FRONT, "--front-context"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    for name in process_state():
        covering = [v for k, v in stamp.COVERS.items() if fnmatch.fnmatchcase(name, k)]
        assert covering, f"the key's {name} is not in memotest_make.stamp.COVERS"
        assert covering[0] in ours, f"{name}: {covering[0]!r} is missing from the front's context"
    assert stamp.RACY_WINDOW_NS == RACY_WINDOW_NS


def test_a_changed_file_is_not_stamped_racily(tmp_path):
    f = tmp_path / "new"
    f.write_text("x")
    assert stamp.path_entries([str(f)], time.time_ns()) is None
    old = time.time_ns() - 3 * RACY_WINDOW_NS
    os.utime(f, ns=(old, old))  # ctime is still now: still too recent
    assert stamp.path_entries([str(f)], time.time_ns()) is None
    assert stamp.path_entries([str(f)], time.time_ns() + 3 * RACY_WINDOW_NS) is not None


@pytest.fixture
def stamped(tmp_path):
    """A project of four memoized lines, each seeing one kind of input, replayed once by
    the full check (which stamps them) and aged past the racy window."""
    counter = tmp_path / "counter"
    root = tmp_path / "proj"
    write(
        root,
        {
            "count.py": COUNT,
            "a.txt": "aaaa",
            "d/one": "1",
            "Makefile": f"""
                SHELL := memotest-sh
                .SHELLFLAGS = --target=$@ -c
                all: file list absent same
                file:
                \t@{PY} count.py {counter} file; cat a.txt
                list:
                \t@{PY} count.py {counter} list; ls d
                absent:
                \t@{PY} count.py {counter} absent; test -e missing || echo none
                same:
                \t@{PY} count.py {counter} same; echo same
            """,
        },
    )
    assert make(root, "-k", "all").returncode == 0
    time.sleep(AGE_S)  # what the runs wrote (the counter) is past the racy window
    second = make(root, "-k", "all")
    assert second.returncode == 0, second.stderr
    assert second.stderr.count("up to date, replayed") == 4
    assert len(list((root / ".memotest" / stamp.STAMPS_DIR).glob("*.stamp"))) == 4
    return root, counter


def test_a_stamped_line_replays_without_the_full_check(stamped):
    root, counter = stamped
    # The store's records out of the way: the full check would run every line.
    (root / ".memotest" / "db.sqlite").rename(root / "db.sqlite.away")
    third = make(root, "-k", "all")
    assert third.returncode == 0, third.stderr
    assert third.stderr.count("up to date, replayed") == 4
    assert "aaaa" in third.stdout and "one" in third.stdout and "none" in third.stdout
    assert all(runs(counter, t) == 1 for t in ("file", "list", "absent", "same"))


def test_what_a_stamped_line_saw_changes_and_it_runs(stamped):
    root, counter = stamped
    a = root / "a.txt"
    st = a.stat()
    a.write_text("bbbb")  # the same size, and the same mtime below: only ctime moves
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    (root / "d" / "two").write_text("2")
    (root / "missing").write_text("")
    proc = make(root, "-k", "all")
    assert proc.returncode == 0, proc.stderr
    assert "bbbb" in proc.stdout and "two" in proc.stdout and "none" not in proc.stdout
    assert [runs(counter, t) for t in ("file", "list", "absent", "same")] == [2, 2, 2, 1]


def test_the_environment_and_process_state_are_keyed(stamped):
    root, counter = stamped
    proc = make(root, "same", LANG="xx_YY.UTF-8")  # a passed variable
    assert proc.returncode == 0, proc.stderr
    assert runs(counter, "same") == 2
    proc = make(root, "same", LC_NEWLY_SET="x")  # a new variable a pass_env glob matches
    assert proc.returncode == 0, proc.stderr
    assert runs(counter, "same") == 3
    proc = make(root, "same", MEMOTEST_TARGETS="other")  # memotest's own: now not memoized
    assert runs(counter, "same") == 4
    umask = subprocess.run(
        ["sh", "-c", "umask 077; exec make --no-print-directory file"],
        cwd=root,
        env={**os.environ, "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert umask.returncode == 0, umask.stderr
    assert runs(counter, "file") == 2


def test_the_front_reads_a_content_as_the_writer_does(tmp_path):
    """The front's SHA-256 of a file, its mode and link count: as the stamp's writer's
    (block boundaries, an empty file, a large one), and no content for what is not a
    regular file read through no link."""
    sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 65536 + 7, 3 << 20]
    for size in sizes:
        f = tmp_path / f"f{size}"
        f.write_bytes(os.urandom(size))
        os.chmod(f, 0o640)
        front = subprocess.run([FRONT, "--front-content", str(f)], capture_output=True, text=True)
        digest = stamp.content(str(f), [])
        assert digest is not None and digest.endswith(" 640 *")
        assert front.stdout.split()[:2] == digest.split()[:2], size
        assert front.stdout.split()[2] == "1"
    (tmp_path / "link").symlink_to(tmp_path / "f1")
    for path in (tmp_path, tmp_path / "link"):
        front = subprocess.run([FRONT, "--front-content", str(path)], capture_output=True)
        assert front.returncode == 1 and stamp.content(str(path), []) is None


def test_a_file_rewritten_with_the_same_bytes_replays_but_not_a_flipped_order(tmp_path):
    """A stamped file whose signature moved is checked by content (a rebuilt binary, the
    same bytes, replays); then the record's mtime orders are checked: ``touch`` that flips
    which file is newer runs the line (the attack on the content fallback)."""
    counter = tmp_path / "counter"
    root = tmp_path / "proj"
    write(
        root,
        {
            "count.py": COUNT,
            "src.txt": "s",
            "data.txt": "d",
            "Makefile": f"""
                SHELL := memotest-sh
                .SHELLFLAGS = --target=$@ -c
                cmp:
                \t@{PY} count.py {counter} cmp; cat gen.txt src.txt data.txt; \\
                  if [ gen.txt -nt src.txt ]; then echo newer; else echo older; fi
            """,
        },
    )
    time.sleep(0.05)
    (root / "gen.txt").write_text("g")  # newer than src.txt
    assert "newer" in make(root, "cmp").stdout
    time.sleep(AGE_S)
    assert "up to date, replayed" in make(root, "cmp").stderr  # the full check: stamped
    assert (root / ".memotest" / stamp.STAMPS_DIR).is_dir()
    (root / "data.txt").write_text("d")  # the same bytes, a new signature
    again = make(root, "cmp")
    assert "up to date, replayed" in again.stderr and runs(counter, "cmp") == 1, again.stderr
    (root / ".memotest" / "db.sqlite").rename(root / "db.away")  # the stamp alone decides
    (root / "data.txt").write_text("d")  # again: the stamp holds it racy, by its content
    again = make(root, "cmp")
    assert "up to date, replayed" in again.stderr and runs(counter, "cmp") == 1, again.stderr
    (root / "data.txt").write_text("e")  # other bytes
    assert "up to date, replayed" not in make(root, "cmp").stderr
    assert runs(counter, "cmp") == 2
    (root / "data.txt").write_text("d")
    (root / "db.away").rename(root / ".memotest" / "db.sqlite")
    assert "up to date, replayed" in make(root, "cmp").stderr  # the older record
    os.utime(root / "src.txt")  # now src.txt is the newer: the same bytes everywhere
    flipped = make(root, "cmp")
    assert flipped.returncode == 0, flipped.stderr
    assert "older" in flipped.stdout and runs(counter, "cmp") == 3
