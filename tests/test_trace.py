"""``memotest trace`` on real processes under the real shim."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import memotest, trace

PY = sys.executable
KEYS = [
    "command",
    "exit_code",
    "complete",
    "incomplete",
    "reads",
    "writes",
    "stats",
    "missing",
    "listed",
    "execs",
    "deleted",
    "loaded",
    "connects",
    "listens",
    "accepted",
    "sockets",
    "processes",
]


def pyc(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def test_json_has_exactly_the_documented_keys(tmp_path):
    t = trace("true")
    assert list(t) == KEYS
    assert t["exit_code"] == 0 and t["complete"] is True
    for key in KEYS[4:16]:
        assert t[key] == sorted(t[key])
    proc = t["processes"][0]
    assert set(proc) == {"pid", "ppid", "exe", "argv", "cwd", "traced"}
    assert proc["traced"] is True


def test_c_program_reads_through_openat_with_a_dirfd(tmp_path, cprog):
    exe = cprog("openat_dirfd")
    (tmp_path / "data.txt").write_text("hello")
    t = trace(exe, str(tmp_path), "data.txt")
    assert str(tmp_path / "data.txt") in t["reads"]
    assert t["complete"], t["incomplete"]


def test_python_read_stat_and_import(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "mymod.py").write_text("X = 1\n")
    t = trace(
        *pyc("""
        import os, sys
        sys.path.insert(0, os.getcwd())
        open('a.txt').read()
        os.stat('b.txt')
        import mymod
    """),
        cwd=tmp_path,
    )
    assert str(tmp_path / "a.txt") in t["reads"]
    assert str(tmp_path / "b.txt") in t["stats"]
    seen = set(t["reads"]) | set(t["stats"])
    assert str(tmp_path / "mymod.py") in seen
    assert any(p.endswith("/json/__init__.py") or "/os.py" in p for p in t["reads"] + t["stats"])
    assert any(p.startswith(os.path.dirname(os.__file__)) for p in t["reads"])


def test_missing_file_probe(tmp_path):
    t = trace(
        *pyc("import os; os.path.exists('nope.txt'); os.access('nope2', os.R_OK)"), cwd=tmp_path
    )
    assert str(tmp_path / "nope.txt") in t["missing"]
    assert str(tmp_path / "nope2") in t["missing"]


def test_import_search_misses_are_recorded(tmp_path):
    t = trace(
        *pyc("""
        try:
            import memotest_no_such_module_xyz
        except ImportError:
            pass
    """),
        cwd=tmp_path,
    )
    # Python lists each sys.path folder (and caches the listing) or stats the candidates.
    assert t["listed"] or any("memotest_no_such_module_xyz" in p for p in t["missing"])


def test_listdir_and_scandir(tmp_path):
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    t = trace(*pyc("import os; os.listdir('d1'); list(os.scandir('d2'))"), cwd=tmp_path)
    assert str(tmp_path / "d1") in t["listed"]
    assert str(tmp_path / "d2") in t["listed"]


def test_file_created_then_read_is_a_write_not_an_input(tmp_path):
    t = trace(*pyc("open('out.txt','w').write('x'); open('out.txt').read()"), cwd=tmp_path)
    out = str(tmp_path / "out.txt")
    assert out in t["writes"]
    assert out not in t["reads"] and out not in t["stats"]


def test_rename_and_unlink(tmp_path):
    (tmp_path / "old").write_text("x")
    (tmp_path / "gone").write_text("x")
    t = trace(*pyc("import os; os.rename('old', 'new'); os.unlink('gone')"), cwd=tmp_path)
    assert str(tmp_path / "old") in t["deleted"]
    assert str(tmp_path / "new") in t["writes"]
    assert str(tmp_path / "gone") in t["deleted"]


def test_three_level_tree_sh_python_c(tmp_path, cprog):
    child = cprog("spawn_child")
    (tmp_path / "leaf.txt").write_text("leaf")
    script = f"import subprocess; subprocess.run([{child!r}, 'leaf.txt'], check=True)"
    t = trace("/bin/sh", "-c", f'{PY} -c "{script}"', cwd=tmp_path)
    assert t["exit_code"] == 0
    assert str(tmp_path / "leaf.txt") in t["reads"]
    exes = {p["exe"] for p in t["processes"]}
    assert child in exes
    assert len(t["processes"]) >= 3
    assert all(p["traced"] for p in t["processes"])
    assert t["complete"], t["incomplete"]
    pids = {p["pid"]: p for p in t["processes"]}
    leaf = next(p for p in t["processes"] if p["exe"] == child)
    assert leaf["ppid"] in pids


@pytest.mark.parametrize("close_fds", [False, True], ids=["posix_spawn", "vfork"])
def test_subprocess_spawn_paths(tmp_path, cprog, close_fds):
    child = cprog("spawn_child")
    (tmp_path / "in.txt").write_text("x")
    t = trace(
        *pyc(f"""
        import subprocess
        subprocess.run([{child!r}, 'in.txt'], close_fds={close_fds}, check=True)
    """),
        cwd=tmp_path,
    )
    assert str(tmp_path / "in.txt") in t["reads"]
    assert child in t["execs"]
    assert t["complete"], t["incomplete"]


def test_env_i_child_is_still_traced(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    t = trace("env", "-i", "/bin/cat", "f.txt", cwd=tmp_path)
    assert str(tmp_path / "f.txt") in t["reads"]
    assert t["complete"], t["incomplete"]


def test_subprocess_with_empty_env_is_still_traced(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    t = trace(
        *pyc(
            "import subprocess; subprocess.run(['/bin/cat', 'f.txt'], env={}, "
            "stdout=subprocess.DEVNULL)"
        ),
        cwd=tmp_path,
    )
    assert str(tmp_path / "f.txt") in t["reads"]
    assert "/bin/cat" in t["execs"] or "/usr/bin/cat" in t["execs"]
    assert t["complete"], t["incomplete"]


def test_threads_opening_files_concurrently_lose_nothing(tmp_path, cprog):
    exe = cprog("threads_open")
    files = tmp_path / "files"
    files.mkdir()
    for i in range(200):
        (files / f"f{i}").write_text(str(i))
    t = trace(exe, "8", str(files), "200")
    want = {str(files / f"f{i}") for i in range(200)}
    assert want <= set(t["reads"])
    assert t["complete"], t["incomplete"]


def test_relative_paths_after_chdir(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "rel.txt").write_text("x")
    t = trace(
        *pyc("import os; os.chdir('sub'); open('rel.txt').read(); os.stat('../sub')"), cwd=tmp_path
    )
    assert str(sub / "rel.txt") in t["reads"]
    assert str(sub) in t["stats"]


def test_static_binary_makes_the_trace_incomplete(tmp_path, cprog):
    exe = cprog("static_reader", static=True)
    (tmp_path / "s.txt").write_text("x")
    t = trace(*pyc(f"import subprocess; subprocess.run([{exe!r}, 's.txt'])"), cwd=tmp_path)
    assert t["complete"] is False
    reasons = [i for i in t["incomplete"] if i["exe"] == exe]
    assert reasons, t["incomplete"]
    assert "statically linked" in reasons[0]["reason"]
    assert isinstance(reasons[0]["pid"], int)


def test_static_binary_as_the_command_itself(tmp_path, cprog):
    exe = cprog("static_reader", static=True)
    (tmp_path / "s.txt").write_text("x")
    t = trace(exe, "s.txt", cwd=tmp_path)
    assert t["complete"] is False
    assert any("statically linked" in i["reason"] for i in t["incomplete"])


def test_connect_to_loopback(cprog):
    exe = cprog("connect_local")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = threading.Thread(target=lambda: server.accept()[0].close(), daemon=True)
    accepted.start()
    try:
        t = trace(exe, str(port))
    finally:
        server.close()
    assert f"stream inet:127.0.0.1:{port}" in t["connects"]


def test_output_and_exit_code_identical_with_and_without_the_shim(tmp_path, cprog):
    exe = cprog("identical_output")
    (tmp_path / "present.txt").write_text("here")
    bare = subprocess.run([exe], cwd=tmp_path, capture_output=True)
    out = tmp_path / "trace.json"
    traced = memotest("trace", "-o", str(out), "--", exe, cwd=tmp_path)
    assert traced.returncode == bare.returncode == 3
    assert traced.stdout == bare.stdout
    assert traced.stderr == bare.stderr
    assert json.loads(out.read_text())["exit_code"] == 3


def test_python_program_identical_with_and_without_the_shim(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "x").write_text("")
    code = (
        "import sys, os, json, subprocess; print(json.dumps(sorted(os.listdir('.')))); "
        "subprocess.run(['echo', 'child']); print('err', file=sys.stderr); sys.exit(7)"
    )
    bare = subprocess.run([PY, "-c", code], cwd=work, capture_output=True)
    traced = memotest("trace", "-o", str(tmp_path / "t.json"), "--", PY, "-c", code, cwd=work)
    assert bare.returncode == 7
    assert (traced.returncode, traced.stdout, traced.stderr) == (
        bare.returncode,
        bare.stdout,
        bare.stderr,
    )


def test_without_o_json_goes_to_stdout_and_command_output_to_stderr():
    proc = memotest("trace", "--", "echo", "hello")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["exit_code"] == 0
    assert b"hello" in proc.stderr


def test_exit_code_passes_through():
    proc = memotest("trace", "--", "sh", "-c", "exit 5")
    assert proc.returncode == 5
    assert json.loads(proc.stdout)["exit_code"] == 5


def test_program_that_closes_all_fds_is_still_traced(tmp_path, cprog):
    exe = cprog("closefds")
    (tmp_path / "in.txt").write_text("input")
    t = trace(exe, "in.txt", "out.txt", cwd=tmp_path)
    assert str(tmp_path / "in.txt") in t["reads"]
    assert str(tmp_path / "out.txt") in t["writes"]
    assert (tmp_path / "out.txt").read_bytes().find(b"\0") == -1


def test_exec_with_empty_environment_is_traced(tmp_path, cprog):
    exe = cprog("exec_env_clear")
    (tmp_path / "f.txt").write_text("x")
    t = trace(exe, "/bin/cat", "f.txt", cwd=tmp_path)
    assert str(tmp_path / "f.txt") in t["reads"]
    assert t["complete"], t["incomplete"]


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "no command given"),
        (["--", "memotest-no-such-command"], "command not found: memotest-no-such-command"),
        (["--", "/nonexistent/tool"], "command not found: /nonexistent/tool"),
        (
            ["-o", "/nonexistent-dir/out.json", "--", "true"],
            "cannot write /nonexistent-dir/out.json",
        ),
    ],
    ids=["no-command", "not-on-path", "no-such-file", "unwritable-output"],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = memotest("trace", *args)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
