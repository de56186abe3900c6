"""A creation that succeeds only where its path was absent saw that absence: a lock taken
by ``mkdir``, ``open(O_CREAT|O_EXCL)``, ``symlink``, ``link``, ``mkfifo`` or a Unix
socket's ``bind`` runs again where the lock is held now, by anything at its path, a
dangling symbolic link included. ``os.makedirs(exist_ok=True)`` and ``Path.mkdir(exist_ok=True)``
end alike whether the folder was absent or a directory: inside them (``worker/untimed.py``,
the shim's ``Y``) the folder a run leaves replays, and a file at its path runs again.
A creation that does not fail where its path is there (``open(p, "w")``, ``"a"``, a
rename) saw "absent, or a regular file" ("or not a directory" for a rename): its own
leftover replays, a folder there runs again.
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
    # POSIX: -p ignores an operand that names an existing directory (creations.mkdir_p)
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


def test_pytest_benchmarks_folder_replays_where_it_is_left(tmp_path, host_pytest_plugins):
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


# Creations that do not fail where the path is there (``O_CREAT`` without ``O_EXCL``, a
# rename): what their success saw is "absent, or a regular file" ("or not a folder" for
# a rename), not nothing. Each writes ``work/<target>``, after reading its group's input.
PLAIN = {
    "open_w": "open(P, 'w').write('x')",
    # bytes kept, never read: a file there ends it the same (appended to, as ``U``)
    "open_a": "open(P, 'a').write('x')",
    "os_open": "os.close(os.open(P, os.O_CREAT | os.O_WRONLY))",
    "sh_redirect": "import subprocess; subprocess.run(['sh', '-c', 'echo x > ' + P], check=True)",
    # the atomic write: a temporary file renamed onto the path
    "rename": "open(P + '.tmp', 'w').write('x'); os.replace(P + '.tmp', P)",
}
# Appended to, then read back: what was there before is what it reads: a leftover with
# content is another run (``empty-file``).
APPEND_READ = "open(P, 'a').write('x'); assert open(P).read() == 'x'"


def test_a_folder_where_a_run_wrote_a_new_file_runs_again(tmp_path):
    """A run that made its file where nothing was (the shim's ``N``, no lookup before it)
    replays where its own leftover is (a regular file: each call ends the same), and runs
    again where a folder, or a symbolic link to one, is there now (``open`` raises
    EISDIR, ``rename`` of a file onto a folder too). The same for a run that found its
    leftover (``W``/``U``): what it replaced was a regular file. Group ``n`` is recorded
    with its paths absent, group ``w`` with its leftovers present."""
    code = "import os; P = 'work/{name}'; open('work/in_{group}').read(); {make}; print('made')"
    kinds = {**PLAIN, "append_read": APPEND_READ}
    targets = {
        f"{group}_{kind}": code.format(name=f"{group}_{kind}", group=group, make=make)
        for group in ("n", "w")
        for kind, make in kinds.items()
        if not (group == "w" and kind == "append_read")
    }
    toml = "".join(f"[targets.{t}]\ncommand = [{PY!r}, '-c', {c!r}]\n" for t, c in targets.items())
    root = write_tree(tmp_path / "proj", {"memotest.toml": toml, "work/in_n": "", "work/in_w": ""})
    assert build_statuses(root)[2] == dict.fromkeys(targets, "passed")
    _code, out, got = build_statuses(root, "-v")  # the leftovers: each replays
    assert got == {**dict.fromkeys(targets, "cached"), "n_append_read": "failed"}, out

    # n: a folder where each made its file; w: runs again, finding its leftover
    for kind in PLAIN:
        (root / f"work/n_{kind}").unlink()
        (root / f"work/n_{kind}").mkdir()
    (root / "work/in_w").write_text("edited")
    _code, out, got = build_statuses(root, "-v")
    n_kinds = {t: s for t, s in got.items() if t.startswith("n_")}
    assert n_kinds == dict.fromkeys(n_kinds, "failed") and len(n_kinds) == len(kinds), out
    assert {t: s for t, s in got.items() if t.startswith("w_")} == dict.fromkeys(
        (t for t in targets if t.startswith("w_")), "passed"
    ), out

    # w: a symbolic link to a folder (a folder for the rename, which replaces a link);
    # its leftover left as it is, ``open_w`` replays
    (root / "work/dir").mkdir()
    for kind in PLAIN:
        if kind == "open_w":
            continue
        (root / f"work/w_{kind}").unlink()
        if kind == "rename":
            (root / f"work/w_{kind}").mkdir()
        else:
            (root / f"work/w_{kind}").symlink_to("dir")
    _code, out, got = build_statuses(root, "-v")
    expected = {f"w_{kind}": "failed" for kind in PLAIN}
    expected["w_open_w"] = "cached"
    assert {t: s for t, s in got.items() if t.startswith("w_")} == expected, out


def test_a_file_read_then_replaced_is_held_by_its_content(tmp_path):
    """A rename onto a path the run read before (an atomic rewrite) adds no "absent or
    not a directory" input there (``tracer/collect.py``): the content the run read holds
    the path. A folder put there, or nothing, runs again; the file it left replays."""
    code = (
        "import os; P = 'work/data'; open(P).read(); "
        "open(P + '.tmp', 'w').write('x'); os.replace(P + '.tmp', P); print('ok')"
    )
    root = project(tmp_path, code)
    (root / "work/data").write_text("x")
    assert build_statuses(root)[2] == {"t": "passed"}
    assert build_statuses(root)[2] == {"t": "passed"}  # no fingerprint before run 1
    assert build_statuses(root)[2] == {"t": "cached"}  # left as found: kept
    (root / "work/data").unlink()
    (root / "work/data").mkdir()
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "failed"}, out
    (root / "work/data").rmdir()
    _code, out, got = build_statuses(root, "-v")
    assert got == {"t": "failed"}, out
