"""Files a target reads and then writes (``rewritten.py``: *rewritten*): a counter, a cache
refreshed in place, a database opened read-write. Real builds, the real shim."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import memotest
from test_build import build, project, statuses

from memotest.store import Store

COUNTER = """
[targets.bump]
command = ["sh", "-c", "n=$(cat counter); echo $((n + 1)) > counter; echo saw $n; test $n -lt 3"]

[targets.other]
command = ["cat", "data"]
"""


def test_a_target_that_rewrites_what_it_read_is_not_reused(tmp_path):
    """Each run of ``bump`` sees what the last one wrote: the third sees 3 and fails.
    Replaying the first result would hide that."""
    root = project(tmp_path, COUNTER, {"counter": "1\n", "data": "x\n"})
    code, out, data = build(root, "-v")
    assert code == 0, out
    assert statuses(data) == {"bump": "passed", "other": "passed"}
    assert "counter was read and then written by the target" in out, out
    _, out, data = build(root, "-v")
    assert statuses(data) == {"bump": "passed", "other": "cached"}
    assert "counter was read and then changed by the target" in out, out
    code, out, data = build(root, "-v")
    assert code == 1, out
    assert statuses(data)["bump"] == "failed"
    assert "saw 3" in out
    with Store.open(root, lock=False) as store:
        rec = store.records(["bump"])["bump"]
    assert rec.rewritten == [str(root / "counter")]
    assert not rec.cacheable


REFRESH = """
[targets.refresh]
command = ["sh", "-c", "x=$(cat cache); echo \\"$x\\" > cache; echo saw $x"]
"""


def test_a_file_rewritten_as_it_was_is_an_input_from_the_second_run(tmp_path):
    root = project(tmp_path, REFRESH, {"cache": "same\n"})
    _, out, data = build(root, "-v")
    assert statuses(data) == {"refresh": "passed"}
    assert "not cached: " in out and "cache was read and then written" in out, out
    # This run is fingerprinted before and after: it left the file as it found it.
    _, out, data = build(root, "-v")
    assert statuses(data) == {"refresh": "passed"}
    assert "not cached" not in out, out
    _, out, data = build(root, "-v")
    assert statuses(data) == {"refresh": "cached"}
    (root / "cache").write_text("other\n")
    _, out, data = build(root, "-v")
    assert statuses(data) == {"refresh": "passed"}
    assert "content changed" in out, out
    assert "saw other" in memotest("show", "--log", "refresh", cwd=root).stdout.decode()


DATABASE = f"""
[targets.db]
command = ["{sys.executable}", "use_db.py"]
"""

USE_DB = """
import sqlite3

con = sqlite3.connect("app.db")
con.execute("CREATE TABLE IF NOT EXISTS runs (n INTEGER)")
seen = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
con.execute("INSERT INTO runs VALUES (1)")
con.commit()
print("runs before this one:", seen)
assert seen < 2
"""


def test_a_database_opened_read_write_is_never_replayed_while_it_changes(tmp_path):
    root = project(tmp_path, DATABASE, {"use_db.py": USE_DB})
    con = sqlite3.connect(root / "app.db")
    con.execute("CREATE TABLE runs (n INTEGER)")
    con.commit()
    con.close()
    for expected in ("passed", "passed", "failed"):
        _, out, data = build(root, "-v")
        assert statuses(data) == {"db": expected}, out


def test_explain_says_why_a_rewriting_target_runs(tmp_path):
    root = project(tmp_path, COUNTER, {"counter": "1\n", "data": "x\n"})
    build(root)
    out = memotest("explain", "bump", cwd=root).stdout.decode()
    assert "counter was read and then written by the target" in out, out


def test_appending_to_a_file_it_does_not_read_keeps_the_result(tmp_path):
    toml = textwrap.dedent(
        """
        [targets.log]
        command = ["sh", "-c", "echo line >> build.log; cat data"]
        """
    )
    root = project(tmp_path, toml, {"data": "x\n"})
    assert statuses(build(root)[2]) == {"log": "passed"}
    assert statuses(build(root)[2]) == {"log": "cached"}
    assert Path(root / "build.log").read_text() == "line\n"


ATOMIC = f"""
[targets.atomic]
command = ["{sys.executable}", "atomic.py"]
"""

WRITE_ATOMICALLY = """
import os
import tempfile

# Not in ".": Python lists sys.path[0] at start-up, and a new entry there re-runs it.
fd, tmp = tempfile.mkstemp(dir="out")  # O_RDWR|O_CREAT|O_EXCL: nothing there to read
os.write(fd, b"table")
os.close(fd)
os.replace(tmp, "out/table.bin")
"""


def test_a_file_created_read_write_was_not_read_before(tmp_path):
    root = project(tmp_path, ATOMIC, {"atomic.py": WRITE_ATOMICALLY, "out/.keep": ""})
    _, out, data = build(root, "-v")
    assert statuses(data) == {"atomic": "passed"}
    assert "not cached" not in out, out
    assert statuses(build(root)[2]) == {"atomic": "cached"}


APPEND_THEN_READ = """
[targets.grow]
command = ["sh", "-c", "echo run >> log; n=$(wc -l < log); echo lines $n; test $n -lt 3"]
"""


def test_a_file_appended_to_then_read_is_an_input_the_run_changed(tmp_path):
    """``>>`` keeps what the file held: the count read back depends on it. Each run sees one
    more line, the second fails; replaying the first result would hide that."""
    root = project(tmp_path, APPEND_THEN_READ, {"log": "old\n"})
    code, out, data = build(root, "-v")
    assert code == 0 and statuses(data) == {"grow": "passed"}, out
    assert "log was read and then written by the target" in out, out
    code, out, data = build(root, "-v")
    assert code == 1 and statuses(data) == {"grow": "failed"}, out
    assert "lines 3" in out, out


IN_PLACE = f"""
[targets.patch]
command = ["{sys.executable}", "patch.py"]
"""

PATCH_IN_PLACE = """
import os
import sys

how = open("how").read().strip()
if how == "wronly":  # O_WRONLY without O_TRUNC: the bytes after the first stay
    fd = os.open("data", os.O_WRONLY)
    os.write(fd, b"A")
    os.close(fd)
elif how == "truncate":  # longer: the old bytes stay, zeros follow
    os.truncate("data", 8)
elif how == "chmod":
    os.chmod("data", 0o644)
elif how == "replace":  # O_TRUNC: nothing of before survives
    open("data", "w").write("Axx")
print(open("data", "rb").read())
sys.exit(1 if open("data", "rb").read().startswith(b"Abad") else 0)
"""


@pytest.mark.parametrize("how", ["wronly", "truncate", "chmod"])
def test_a_file_changed_in_place_then_read_is_an_input(tmp_path, how):
    """A write that keeps earlier content (no ``O_TRUNC``, a longer ``truncate``, a mode
    change), then a read: what was there before decides the result."""
    root = project(tmp_path, IN_PLACE, {"patch.py": PATCH_IN_PLACE, "how": how, "data": "xok"})
    code, out, data = build(root, "-v")
    assert code == 0 and statuses(data) == {"patch": "passed"}, out
    (root / "data").write_text("xbad")
    code, out, data = build(root, "-v")
    # Ran again (not replayed): only the in-place write turns "xbad" into "Abad".
    assert statuses(data) == {"patch": "failed" if how == "wronly" else "passed"}, out


def test_a_file_replaced_before_it_is_read_stays_an_output(tmp_path):
    root = project(
        tmp_path, IN_PLACE, {"patch.py": PATCH_IN_PLACE, "how": "replace", "data": "xok"}
    )
    assert statuses(build(root)[2]) == {"patch": "passed"}
    (root / "data").write_text("xbad")
    assert statuses(build(root)[2]) == {"patch": "cached"}
