"""Files the tracer must see however a program names or reaches them: through ``/proc`` and
``/dev`` (``_shim/procfs.c``) and through the C library's own reads (``_shim/libcfiles.c``).
Real programs under the real shim."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from pathlib import Path

from conftest import trace
from test_build import build, project, statuses

PY = sys.executable
ZONEINFO = Path("/usr/share/zoneinfo")


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


# ------------------------------------------ class 7: files the C library reads itself


def test_time_zone_files_read_by_localtime(tmp_path):
    zone = tmp_path / "zone"
    zone.write_bytes(ZONEINFO.joinpath("Europe/Paris").read_bytes())
    env = dict(os.environ, TZ=f":{zone}")
    t = trace(*py("import time; time.localtime(0)"), cwd=tmp_path, env=env)
    assert str(zone) in t["reads"], t["reads"]
    env = {k: v for k, v in os.environ.items() if k != "TZ"}
    t = trace(*py("import time; time.strftime('%Z', time.localtime(0))"), cwd=tmp_path, env=env)
    assert "/etc/localtime" in t["reads"], t["reads"]
    # the file the link names, too
    assert os.path.realpath("/etc/localtime") in t["reads"], t["reads"]


def test_nss_files_read_by_getpwnam_and_gethostbyname(tmp_path):
    code = """
        import pwd, grp, socket
        pwd.getpwnam("root"); grp.getgrgid(0)
        socket.gethostbyname("localhost"); socket.getservbyname("http", "tcp")
        """
    t = trace(*py(code), cwd=tmp_path)
    for path in ("/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts"):
        assert path in t["reads"] or path in t["missing"], (path, t["reads"])
    assert "/etc/services" in t["reads"] or "/etc/services" in t["missing"]
    assert "/etc/host.conf" in t["reads"] or "/etc/host.conf" in t["missing"]


def test_a_c_program_calling_getpwuid_and_localtime(tmp_path, cprog):
    exe = cprog("libc_files")
    env = {k: v for k, v in os.environ.items() if k != "TZ"}
    t = trace(exe, cwd=tmp_path, env=env)
    assert "/etc/passwd" in t["reads"], t["reads"]
    assert "/etc/localtime" in t["reads"], t["reads"]
    assert "/usr/lib/locale/locale-archive" in t["reads"] + t["missing"], t
    assert t["complete"], t["incomplete"]


ZONE = """
[targets.tz]
command = ["{py}", "-c", "import time; h = time.localtime(0).tm_hour; print(h); assert h == 1"]
env = {{ TZ = ":{root}/zone" }}
"""


def test_a_time_zone_file_is_an_input(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    root = project(root, ZONE.format(py=PY, root=root))
    (root / "zone").write_bytes(ZONEINFO.joinpath("Europe/Paris").read_bytes())
    assert statuses(build(root)[2]) == {"tz": "passed"}
    assert statuses(build(root)[2]) == {"tz": "cached"}
    (root / "zone").write_bytes(ZONEINFO.joinpath("Asia/Tokyo").read_bytes())
    assert statuses(build(root)[2]) == {"tz": "failed"}
