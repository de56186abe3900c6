"""The shim's ``N`` record: which written paths the traced tree created (``Trace.created``)."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from memotest.tracer.run import trace_command

PY = sys.executable


def run_py(code: str, cwd) -> object:
    """Traces ``python -c CODE`` in ``cwd``; the script must succeed."""
    t = trace_command([PY, "-c", textwrap.dedent(code)], cwd=str(cwd))
    assert t.exit_code == 0, t
    assert t.complete, t.incomplete
    return t


def test_open_w_of_a_new_file_is_created(tmp_path):
    t = run_py("open('new.txt', 'w').write('x')", tmp_path)
    new = str(tmp_path / "new.txt")
    assert new in t.writes
    assert new in t.created


def test_overwriting_an_existing_file_is_not_created(tmp_path):
    (tmp_path / "old.txt").write_text("before")
    t = run_py("open('old.txt', 'w').write('after'); open('old.txt', 'a').write('!')", tmp_path)
    old = str(tmp_path / "old.txt")
    assert old in t.writes
    assert old not in t.created


def test_open_x_is_created(tmp_path):
    t = run_py("open('excl.txt', 'x').write('x')", tmp_path)
    assert str(tmp_path / "excl.txt") in t.created


def test_open_x_on_an_existing_file_fails_and_creates_nothing(tmp_path):
    (tmp_path / "there.txt").write_text("x")
    t = run_py(
        """
        try:
            open('there.txt', 'x')
        except FileExistsError:
            pass
        """,
        tmp_path,
    )
    there = str(tmp_path / "there.txt")
    assert there not in t.created and there not in t.writes
    assert there in t.stats


def test_mkdir_is_created(tmp_path):
    t = run_py("import os; os.mkdir('d'); os.makedirs('e/f')", tmp_path)
    for name in ("d", "e", "e/f"):
        assert str(tmp_path / name) in t.created


def test_rename_onto_a_new_name_is_created(tmp_path):
    (tmp_path / "src").write_text("x")
    t = run_py("import os; os.rename('src', 'dst')", tmp_path)
    assert str(tmp_path / "dst") in t.created
    assert str(tmp_path / "src") in t.deleted
    assert str(tmp_path / "src") not in t.created


def test_rename_onto_an_existing_name_is_not_created(tmp_path):
    (tmp_path / "src").write_text("new")
    (tmp_path / "dst").write_text("old")
    t = run_py("import os; os.replace('src', 'dst')", tmp_path)
    dst = str(tmp_path / "dst")
    assert dst in t.writes
    assert dst not in t.created
    assert str(tmp_path / "src") in t.deleted


def test_symlink_and_hard_link_are_created(tmp_path):
    (tmp_path / "target").write_text("x")
    t = run_py("import os; os.symlink('target', 'sym'); os.link('target', 'hard')", tmp_path)
    assert str(tmp_path / "sym") in t.created
    assert str(tmp_path / "hard") in t.created
    assert str(tmp_path / "target") not in t.created


def test_mkstemp_and_mkdtemp_in_a_folder_of_the_test(tmp_path):
    (tmp_path / "tmp").mkdir()
    t = run_py(
        """
        import os, tempfile
        fd, name = tempfile.mkstemp(dir='tmp')
        os.close(fd)
        d = os.path.abspath(tempfile.mkdtemp(dir='tmp'))
        open('names', 'w').write(name + '\\n' + d)
        """,
        tmp_path,
    )
    name, d = (tmp_path / "names").read_text().split("\n")
    assert os.path.dirname(name) == str(tmp_path / "tmp")
    assert name in t.created
    assert d in t.created
    assert str(tmp_path / "tmp") not in t.created


def test_libc_entry_points_through_ctypes(tmp_path):
    """creat, fopen, mkfifo, mkstemp (C), renameat2 flags, and that errno survives the
    shim's existence check (the check fails with ENOENT on a path about to be created)."""
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    (tmp_path / "c").write_text("c")
    (tmp_path / "kept").write_text("k")
    t = run_py(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fopen.restype = ctypes.c_void_p
        libc.fclose.argtypes = [ctypes.c_void_p]
        AT_FDCWD = -100

        ctypes.set_errno(1234)
        fd = libc.open(b'via_open', os.O_WRONLY | os.O_CREAT, 0o644)
        assert fd >= 0 and ctypes.get_errno() == 1234, ctypes.get_errno()
        os.close(fd)
        fd = libc.creat(b'via_creat', 0o644)
        assert fd >= 0
        os.close(fd)
        f = libc.fopen(b'via_fopen', b'a+')
        assert f
        libc.fclose(f)
        f = libc.fopen(b'kept', b'w')
        assert f
        libc.fclose(f)
        assert libc.mkfifo(b'fifo', 0o644) == 0
        tmpl = ctypes.create_string_buffer(b'tmpXXXXXX')
        fd = libc.mkstemp(tmpl)
        assert fd >= 0
        os.close(fd)
        open('tmpname', 'w').write(tmpl.value.decode())

        ctypes.set_errno(4321)
        assert libc.rename(b'a', b'a2') == 0
        assert ctypes.get_errno() == 4321, ctypes.get_errno()
        # RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2
        assert libc.renameat2(AT_FDCWD, b'a2', AT_FDCWD, b'a3', 1) == 0
        assert libc.renameat2(AT_FDCWD, b'b', AT_FDCWD, b'c', 2) == 0
        """,
        tmp_path,
    )
    created = {os.path.relpath(p, tmp_path) for p in t.created if p.startswith(str(tmp_path))}
    tmpname = (tmp_path / "tmpname").read_text()
    assert {"via_open", "via_creat", "via_fopen", "fifo", tmpname, "a2", "a3"} <= created
    for name in ("kept", "b", "c"):
        assert str(tmp_path / name) in t.writes
        assert name not in created
    assert str(tmp_path / "a") in t.deleted and str(tmp_path / "a2") in t.deleted


@pytest.mark.parametrize("mode", ["w", "a", "r+"])
def test_plain_open_of_existing_file_keeps_w(tmp_path, mode):
    (tmp_path / "f").write_text("x")
    t = run_py(f"open('f', {mode!r}).write('y')", tmp_path)
    assert str(tmp_path / "f") in t.writes
    assert str(tmp_path / "f") not in t.created


def test_a_file_deleted_then_written_again_was_not_created(tmp_path):
    """The shim writes ``N`` for the second open (the path was absent just before it), but
    the path existed before the run: its first change is the ``D``."""
    (tmp_path / "f").write_text("x")
    t = run_py("import os; os.remove('f'); open('f', 'w').write('y')", tmp_path)
    f = str(tmp_path / "f")
    assert f in t.writes
    assert f not in t.created
