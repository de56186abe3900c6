"""A creation that succeeds only where its path was absent saw that absence: a lock taken
by ``mkdir``, ``open(O_CREAT|O_EXCL)``, ``symlink``, ``link``, ``mkfifo`` or a Unix
socket's ``bind`` runs again where the lock is held now, by anything at its path, a
dangling symbolic link included. ``os.makedirs(exist_ok=True)`` and ``Path.mkdir(exist_ok=True)``
end alike whether the folder was absent or a directory: inside them (``worker/untimed.py``,
the shim's ``Y``) the folder a run leaves replays, and a file at its path runs again.
Real builds under the real shim (docs/limits.md, "A run's own leftovers").
"""

from __future__ import annotations

import sys

import pytest
from conftest import build_statuses, write_tree

PY = sys.executable
# What the pytest processes memotest watches, and the warm worker, do before the tests.
INSTALL = "from memotest.worker import untimed; assert untimed.install(); import os, pathlib; "

LOCKS = {
    "mkdir": "os.mkdir('work/lock')",
    "o_excl": "open('work/lock', 'x').close()",
    "symlink": "open('work/src', 'a').close(); os.symlink('src', 'work/lock')",
    "link": "open('work/src', 'a').close(); os.link('work/src', 'work/lock')",
    "mkfifo": "os.mkfifo('work/lock')",
    # a plain mkdir in a process whose exist_ok creations are told apart stays a lock
    "mkdir_installed": INSTALL + "os.mkdir('work/lock')",
    "path_mkdir_installed": INSTALL + "pathlib.Path('work/lock').mkdir()",
    "mkdir_command": "import subprocess; subprocess.run(['mkdir', 'work/lock'], check=True)",
    # bind() of a Unix path makes the socket file, EADDRINUSE where anything is there
    "bind": "import socket; socket.socket(socket.AF_UNIX).bind('work/lock')",
}
SH = "import subprocess; subprocess.run({}, check=True)"


def project(tmp_path, code: str):
    # ``work``: a folder nobody lists (``python -c`` lists the current one)
    return write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = [{PY!r}, '-c', {code!r}]\n",
            "work/keep": "",
        },
    )


@pytest.mark.parametrize("kind", sorted(LOCKS))
def test_a_lock_runs_again_where_it_is_held(tmp_path, kind):
    root = project(tmp_path, "import os, pathlib; " + LOCKS[kind] + "; print('took it')")
    assert build_statuses(root)[2] == {"t": "passed"}
    _code, out, got = build_statuses(root, "-v")  # held now: the run fails
    assert got == {"t": "failed"}, out
    # a dangling symbolic link holds it too: each of these creations fails with EEXIST
    # there, though a lookup that follows the link finds nothing
    lock = root / "work/lock"
    if lock.is_dir() and not lock.is_symlink():
        lock.rmdir()
    else:
        lock.unlink()
    lock.symlink_to("nowhere")
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "failed"}, out


MAKES = {
    "makedirs": "os.makedirs('work/out/sub', exist_ok=True)",
    "path_mkdir": "pathlib.Path('work/out/sub').mkdir(parents=True, exist_ok=True)",
    # POSIX: -p ignores an operand that names an existing directory (collect._mkdir_p)
    "mkdir_p": SH.format(["mkdir", "-p", "work/out/sub"]),
}


@pytest.mark.parametrize("kind", sorted(MAKES))
def test_a_folder_made_with_exist_ok_replays_where_it_is_left(tmp_path, kind):
    root = project(tmp_path, INSTALL + MAKES[kind] + "; print('made')")
    assert build_statuses(root)[2] == {"t": "passed"}
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "cached"}, out
    (root / "work/out/sub").rmdir()  # a fresh checkout: replays too
    assert build_statuses(root)[2] == {"t": "cached"}


@pytest.mark.parametrize("kind", sorted(MAKES))
@pytest.mark.parametrize("where", ["out", "out/sub"])
def test_a_file_where_an_exist_ok_folder_was_made_runs_again(tmp_path, kind, where):
    root = project(tmp_path, INSTALL + MAKES[kind] + "; print('made')")
    assert build_statuses(root)[2] == {"t": "passed"}
    (root / "work/out/sub").rmdir()
    if where == "out":
        (root / "work/out").rmdir()
    (root / "work" / where).write_text("a file: makedirs raises")
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "failed"}, out


def test_a_verbose_mkdir_p_says_what_it_made_and_runs_again(tmp_path):
    """``mkdir -pv`` prints "created directory" only when it made it: held as absence."""
    root = project(tmp_path, SH.format(["mkdir", "-pv", "work/out"]))
    assert build_statuses(root)[2] == {"t": "passed"}
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "passed"}, out
    assert "appeared" in out, out


def test_pytest_benchmarks_folder_replays_where_it_is_left(tmp_path):
    """pytest-benchmark (installed with the tests) makes ``.benchmarks`` in every pytest
    run, ``mkdir(parents=True)`` with its error dropped: a plain pytest target replays at
    its second build (``memotest_walk``'s ``pytest_configure``)."""
    pytest.importorskip("pytest_benchmark")  # not in the test extra: where it is installed
    root = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f"[targets.t]\ncommand = [{PY!r}, '-m', 'pytest', '-q', "
            "'-p', 'no:cacheprovider', 'tests']\n",
            "tests/test_one.py": "def test_one():\n    pass\n",
        },
    )
    assert build_statuses(root)[2] == {"t": "passed"}
    assert (root / ".benchmarks").is_dir()
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "cached"}, out
    (root / ".benchmarks").rmdir()
    (root / ".benchmarks").write_text("a file")  # its mkdir fails there: not the same run
    _code, out, got = build_statuses(root, "-v")
    assert got != {"t": "cached"} and ".benchmarks: appeared" in out, out


CREATES_IN = {
    "open_w": "open('work/sub/f', 'w')",
    "o_excl": "open('work/sub/f', 'x')",
    "mkdir": "os.mkdir('work/sub/d')",
    "symlink": "os.symlink('x', 'work/sub/l')",
    "link": "os.link('work/src_link', 'work/sub/l')",
    "mkfifo": "os.mkfifo('work/sub/p')",
    "rename": "os.rename('work/src_rename', 'work/sub/r')",
    "bind": "import socket; socket.socket(socket.AF_UNIX).bind('work/sub/s')",
}


def test_a_creation_that_found_no_folder_runs_again_where_the_folder_is(tmp_path):
    """A creation in a folder that is not there fails (ENOENT) whatever its own path: the
    folder's absence is what it saw. A target that passes because each one fails runs
    again once the folder is made (one target per kind, one build)."""
    passes_if_it_fails = (
        "import os\ntry:\n    {}\nexcept FileNotFoundError:\n    raise SystemExit(0)\n"
        "raise SystemExit(1)\n"
    )
    targets = "".join(
        f"[targets.{kind}]\ncommand = [{PY!r}, '-c', {passes_if_it_fails.format(code)!r}]\n"
        for kind, code in CREATES_IN.items()
    )
    root = write_tree(
        tmp_path / "proj",
        {"memotest.toml": targets, "work/src_link": "", "work/src_rename": ""},
    )
    assert build_statuses(root)[2] == dict.fromkeys(CREATES_IN, "passed")
    (root / "work/sub").mkdir()
    _code, out, got = build_statuses(root, "-v")
    assert got == dict.fromkeys(CREATES_IN, "failed"), out


@pytest.mark.xfail(
    strict=True,
    reason="an O_CREAT without O_EXCL (and a plain rename) onto an absent path is held as "
    "nothing: its success says 'absent or a file it may replace'; a folder there now "
    "makes the open fail (EISDIR) but the record replays (not done: 'or-file' absence)",
)
def test_a_folder_where_a_run_wrote_a_new_file_runs_again(tmp_path):
    root = project(tmp_path, "open('work/out', 'w').write('x'); print('wrote')")
    assert build_statuses(root)[2] == {"t": "passed"}
    (root / "work/out").unlink()
    (root / "work/out").mkdir()  # open(..., 'w') raises IsADirectoryError here
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "failed"}, out
