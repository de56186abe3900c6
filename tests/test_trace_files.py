"""Files the tracer must see however a program names or reaches them: through ``/proc`` and
``/dev`` (``_shim/procfs.c``) and through the C library's own reads (``_shim/libcfiles.c``).
Real programs under the real shim."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid

from conftest import trace
from test_build import build, project, statuses

PY = sys.executable


def py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


# ------------------------------------------------- class 8: /proc and /dev paths


def test_proc_self_cwd_and_root_name_real_files(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    t = trace(
        *py(
            f"""
            import os
            open("/proc/self/cwd/a.txt").read()
            open("/proc/self/root{tmp_path}/b.txt").read()
            os.stat("/proc/thread-self/cwd/nothere")
            open("/proc/%d/cwd/a.txt" % os.getpid()).read()
            """
        ),
        cwd=tmp_path,
    )
    assert str(tmp_path / "a.txt") in t["reads"], t["reads"]
    assert str(tmp_path / "b.txt") in t["reads"], t["reads"]
    assert str(tmp_path / "nothere") in t["missing"], t["missing"]
    assert t["complete"], t["incomplete"]


def test_dev_fd_and_stdin_redirected_from_a_file(tmp_path):
    (tmp_path / "in.txt").write_text("in")
    (tmp_path / "three.txt").write_text("3")
    script = "cat /dev/stdin < in.txt; cat /dev/fd/3 3< three.txt; echo x | cat /dev/stdin"
    t = trace("sh", "-c", script, cwd=tmp_path)
    assert str(tmp_path / "in.txt") in t["reads"], t["reads"]
    assert str(tmp_path / "three.txt") in t["reads"], t["reads"]
    # A pipe is truly virtual: nothing under /proc or /dev is left.
    assert not [p for p in t["reads"] if p.startswith(("/proc/", "/dev/fd"))], t["reads"]


def test_dev_shm_files_are_files(tmp_path):
    name = f"memotest-{uuid.uuid4().hex}"
    shm = f"/dev/shm/{name}"
    with open(shm, "w") as f:
        f.write("x")
    try:
        code = f"open({shm!r}).read(); import _posixshmem; _posixshmem.shm_unlink('/{name}')"
        t = trace(*py(code), cwd=tmp_path)
        assert shm in t["reads"], t["reads"]
        assert shm in t["deleted"], t["deleted"]
    finally:
        if os.path.exists(shm):
            os.unlink(shm)


PROC_CWD = """
[targets.via-proc]
command = ["sh", "-c", "grep -q ok /proc/self/cwd/data"]
"""


def test_a_file_read_through_proc_self_cwd_is_an_input(tmp_path):
    root = project(tmp_path, PROC_CWD, {"data": "ok\n"})
    assert statuses(build(root)[2]) == {"via-proc": "passed"}
    assert statuses(build(root)[2]) == {"via-proc": "cached"}
    (root / "data").write_text("bad\n")
    assert statuses(build(root)[2]) == {"via-proc": "failed"}
