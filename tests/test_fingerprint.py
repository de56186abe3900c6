"""Fingerprints of real files: each kind holds until the change that breaks it, the stat
fast path skips hashing only when it is safe, and each path is stat'ed once per build."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest
import xxhash

from memotest.inputs.check import check, describe_change, holds, verify
from memotest.model import Input, Kind, StatSig
from memotest.world.fingerprint import (
    RACY_WINDOW_NS,
    UNREADABLE,
    FileStates,
    Fingerprint,
    Refresh,
    is_racy,
)

AGE_S = RACY_WINDOW_NS / 1e9 + 0.2


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def backdate(path: Path | str, seconds: float = 10.0) -> None:
    t = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(t, t), follow_symlinks=False)


@pytest.fixture(scope="module")
def aged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files whose mtime is 10 s old and whose ctime has left the racy window."""
    root = tmp_path_factory.mktemp("aged")
    for name in ("a.txt", "b.txt", "c.txt"):
        write(root / name, f"content of {name}\n")
    (root / "sub").mkdir()
    write(root / "sub" / "x.py", "x = 1\n")
    for p in [root / "a.txt", root / "b.txt", root / "c.txt", root / "sub" / "x.py", root / "sub"]:
        backdate(p)
    time.sleep(AGE_S)  # once for the module: ctime (not settable) must age too
    return root


def file_digest(path: str | Path, data: bytes) -> str:
    """A file's digest as ``memotest/world/observable.py`` makes it: content, mode, link count."""
    st = os.stat(path)
    return f"{xxhash.xxh3_128_hexdigest(data)}:{stat.S_IMODE(st.st_mode):o}:{st.st_nlink}"


def fp(path: str | Path, kind: Kind = Kind.FILE) -> Fingerprint:
    return FileStates().fingerprint(str(path), kind)


def test_file_holds_until_content_changes(tmp_path: Path) -> None:
    p = write(tmp_path / "f.txt", "one\n")
    rec = fp(p)
    assert rec.kind is Kind.FILE
    assert rec.digest == file_digest(p, b"one\n")
    assert holds(FileStates(), rec)
    write(tmp_path / "f.txt", "two, longer\n")
    states = FileStates()
    assert not holds(states, rec)
    assert describe_change(rec, states) == "content changed"


def test_same_size_same_mtime_edit_in_racy_window_is_hashed(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    p = write(path, "aaaa\n")
    rec = fp(p)
    st = os.stat(p)
    assert is_racy(rec.sig, rec.verified_ns)  # just written: its stamps can't be trusted
    path.write_text("bbbb\n")  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    assert os.stat(p).st_mtime_ns == rec.sig.mtime_ns
    assert os.stat(p).st_size == rec.sig.size
    states = FileStates()
    assert check(states, rec) is False
    assert states.counters.hashed[p] == 1
    assert describe_change(rec, states) == "content changed"


def test_identical_signature_within_racy_window_is_not_trusted(tmp_path: Path) -> None:
    # The worst case: an edit inside one timestamp tick leaves mtime, size, ino and ctime
    # all equal to what was recorded. Only the racy rule saves us.
    path = tmp_path / "f.txt"
    p = write(path, "aaaa\n")
    rec = fp(p)
    path.write_text("bbbb\n")
    same_sig = StatSig.of(os.stat(p))
    collided = Fingerprint(p, Kind.FILE, rec.digest, same_sig, rec.verified_ns)
    states = FileStates()
    assert check(states, collided) is False
    assert states.counters.hashed[p] == 1


def test_unchanged_racy_file_is_hashed_and_refreshed(tmp_path: Path) -> None:
    p = write(tmp_path / "f.txt", "same\n")
    rec = fp(p)
    states = FileStates()
    verdict = check(states, rec)
    assert states.counters.hashed[p] == 1
    # Hashed again and still the same: holds (refreshed only when that helps).
    assert verdict is True or isinstance(verdict, Refresh)


def test_old_unchanged_file_is_not_rehashed(aged: Path) -> None:
    p = str(aged / "a.txt")
    rec = fp(p)
    assert not is_racy(rec.sig, rec.verified_ns)
    states = FileStates()
    assert check(states, rec) is True
    assert states.counters.hashed[p] == 0
    assert sum(states.counters.hashed.values()) == 0


def test_old_file_with_restored_mtime_is_caught_by_ctime(aged: Path, tmp_path: Path) -> None:
    # Same size, mtime put back: the ctime in the signature still moved.
    p = write(tmp_path / "f.txt", "1234\n")
    backdate(p)
    time.sleep(AGE_S)
    rec = fp(p)
    assert not is_racy(rec.sig, rec.verified_ns)
    st = os.stat(p)
    Path(p).write_text("5678\n")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    states = FileStates()
    assert check(states, rec) is False
    assert describe_change(rec, states) == "content changed"


def test_each_path_is_stated_once_per_build(aged: Path) -> None:
    paths = [str(aged / n) for n in ("a.txt", "b.txt", "c.txt")]
    recs = [fp(p) for p in paths] + [fp(aged / "missing", Kind.FILE), fp(aged / "sub", Kind.DIR)]
    states = FileStates()
    for _ in range(50):  # 50 targets sharing the same inputs
        for r in recs:
            assert holds(states, r)
    for r in recs:
        assert states.counters.stat_calls[r.path] == 1, r.path
    assert sum(states.counters.hashed.values()) == 0


def test_each_path_is_hashed_once_per_build(tmp_path: Path) -> None:
    p = write(tmp_path / "f.txt", "fresh\n")  # racy: must be hashed, but only once
    rec = fp(p)
    states = FileStates()
    for _ in range(20):
        assert holds(states, rec)
    assert states.counters.hashed[p] == 1


def test_absent_holds_until_the_path_appears(tmp_path: Path) -> None:
    p = str(tmp_path / "mod.py")
    rec = fp(p)
    assert rec.kind is Kind.ABSENT
    assert holds(FileStates(), rec)
    write(tmp_path / "mod.py", "")
    states = FileStates()
    assert not holds(states, rec)
    assert describe_change(rec, states) == "appeared"


def test_absent_below_a_file_is_enotdir(tmp_path: Path) -> None:
    write(tmp_path / "f", "")
    rec = fp(tmp_path / "f" / "child")
    assert rec.kind is Kind.ABSENT
    assert holds(FileStates(), rec)


def test_dangling_symlink_is_absent(tmp_path: Path) -> None:
    (tmp_path / "l").symlink_to(tmp_path / "nowhere")
    rec = fp(tmp_path / "l")
    assert rec.kind is Kind.ABSENT
    write(tmp_path / "nowhere", "now here\n")
    assert describe_change(rec, FileStates()) == "appeared"


def test_file_disappears_or_becomes_a_directory(tmp_path: Path) -> None:
    p = write(tmp_path / "f", "x")
    rec = fp(p)
    os.unlink(p)
    assert describe_change(rec, FileStates()) == "disappeared"
    os.mkdir(p)
    assert describe_change(rec, FileStates()) == "is now a directory"


def test_dir_holds_until_it_is_not_a_directory(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    rec = fp(d)
    assert rec.kind is Kind.DIR and rec.digest == f"{stat.S_IMODE(d.stat().st_mode):o}"
    write(d / "new", "")  # a DIR input does not care about entries
    assert holds(FileStates(), rec)
    (d / "new").unlink()
    d.rmdir()
    write(d, "now a file")
    states = FileStates()
    assert not holds(states, rec)
    assert describe_change(rec, states) == "is no longer a directory"


def test_listing_gained_and_lost_entries_are_named(tmp_path: Path) -> None:
    d = tmp_path / "pkg"
    for n in ("a.py", "b.py", "old.py"):
        write(d / n, "")
    rec = fp(d, Kind.LISTING)
    assert rec.kind is Kind.LISTING
    assert rec.names == ("a.py", "b.py", "old.py")
    assert rec.digest == xxhash.xxh3_128_hexdigest(b"a.py\0b.py\0old.py\0\0fff")
    write(d / "a.py", "content changes do not change a listing")
    assert holds(FileStates(), rec)
    write(d / "c.py", "")
    write(d / "d.py", "")
    (d / "old.py").unlink()
    states = FileStates()
    assert not holds(states, rec)
    assert describe_change(rec, states) == (
        "directory gained entries: c.py, d.py; lost entries: old.py"
    )
    # Without the recorded names (an Input from elsewhere) the phrase is generic.
    assert describe_change(rec.input, FileStates()) == "directory entries changed"
    assert describe_change(rec.input, FileStates(), ["a.py", "b.py", "old.py"]).startswith(
        "directory gained entries: c.py, d.py"
    )


def test_listing_only_lost(tmp_path: Path) -> None:
    d = tmp_path / "pkg"
    write(d / "a.py", "")
    write(d / "b.py", "")
    rec = fp(d, Kind.LISTING)
    (d / "b.py").unlink()
    assert describe_change(rec, FileStates()) == "directory lost entries: b.py"


def test_old_listing_is_not_relisted(aged: Path) -> None:
    rec = fp(aged / "sub", Kind.LISTING)
    states = FileStates()
    assert check(states, rec) is True
    assert sum(states.counters.listed.values()) == 0


def test_listing_renamed_entry_detected_even_when_racy(tmp_path: Path) -> None:
    d = tmp_path / "pkg"
    write(d / "a.py", "")
    rec = fp(d, Kind.LISTING)
    os.rename(d / "a.py", d / "z.py")
    assert (
        describe_change(rec, FileStates()) == "directory gained entries: z.py; lost entries: a.py"
    )


def test_other_kind_fifo_and_socket(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rec = fp(fifo)  # must not block opening the fifo
    assert rec.kind is Kind.OTHER
    assert holds(FileStates(), rec)
    fifo.unlink()
    write(fifo, "now a file")
    assert describe_change(rec, FileStates()) == "is now a regular file"
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        assert fp(sock_path).kind is Kind.OTHER


def test_symlink_repointed_to_identical_content_is_a_change(tmp_path: Path) -> None:
    write(tmp_path / "v1.txt", "same\n")
    write(tmp_path / "v2.txt", "same\n")
    link = tmp_path / "current"
    link.symlink_to("v1.txt")
    rec = fp(link)
    assert rec.kind is Kind.FILE and rec.link == "v1.txt"
    assert rec.digest != fp(tmp_path / "v1.txt").digest  # the link text is covered
    assert holds(FileStates(), rec)
    link.unlink()
    link.symlink_to("v2.txt")
    states = FileStates()
    assert not holds(states, rec)
    assert describe_change(rec, states) == "link now points to v2.txt"
    link.unlink()
    write(link, "same\n")
    assert describe_change(rec, FileStates()) == "is no longer a symlink"


def test_symlink_target_content_change(tmp_path: Path) -> None:
    target = write(tmp_path / "t.txt", "a")
    (tmp_path / "l").symlink_to("t.txt")
    rec = fp(tmp_path / "l")
    write(Path(target), "b")
    assert describe_change(rec, FileStates()) == "content changed"


def test_unreadable_path_never_matches(tmp_path: Path) -> None:
    p = str(tmp_path / ("x" * 300))  # ENAMETOOLONG: neither absent nor present
    states = FileStates()
    assert states.stat(p) is UNREADABLE
    for kind in Kind:
        assert verify(states, p, kind.value, "") is False
    assert describe_change(Input(p, Kind.ABSENT, ""), states).startswith("is unreadable")
    with pytest.raises(OSError):
        states.fingerprint(p)


def test_fingerprint_is_a_snapshot_unless_fresh(tmp_path: Path) -> None:
    p = write(tmp_path / "f", "1")
    states = FileStates()
    first = states.fingerprint(p)
    write(Path(p), "22")
    assert states.fingerprint(p).digest == first.digest  # the build's snapshot
    assert states.fingerprint(p, fresh=True).digest == file_digest(p, b"22")


def test_fingerprint_reuses_a_digest_that_held(aged: Path) -> None:
    p = str(aged / "b.txt")
    rec = fp(p)
    states = FileStates()
    assert check(states, rec) is True
    again = states.fingerprint(p, fresh=True)  # re-stat, but no re-hash
    assert again == rec
    assert states.counters.hashed[p] == 0


def test_fresh_fingerprints_of_an_old_file_hash_it_once_per_build(aged: Path) -> None:
    """Each finished target fingerprints what it read afresh; an unchanged file that many
    targets read (the standard library) is hashed by the first only."""
    p = str(aged / "c.txt")
    states = FileStates()
    first = states.fingerprint(p, fresh=True)
    for _ in range(3):
        assert states.fingerprint(p, fresh=True) == first
    assert states.counters.hashed[p] == 1
    listed = states.fingerprint(str(aged / "sub"), Kind.LISTING, fresh=True)
    assert states.fingerprint(str(aged / "sub"), Kind.LISTING, fresh=True) == listed
    assert states.counters.listed[str(aged / "sub")] == 1


def test_fresh_fingerprint_after_an_edit_hashes_again(tmp_path: Path) -> None:
    p = tmp_path / "old.txt"
    write(p, "one\n")
    backdate(p)
    states = FileStates(racy_window_ns=0)  # the old file is trusted by its signature
    first = states.fingerprint(str(p), fresh=True)
    write(p, "two\n")  # same size; the mtime is now, the ctime changes too
    backdate(p)  # even with the old mtime put back
    again = states.fingerprint(str(p), fresh=True)
    assert again.digest != first.digest
    assert again.digest == file_digest(p, b"two\n")


def test_big_file_hashed_in_chunks(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 17)
    p = tmp_path / "big"
    p.write_bytes(data)
    assert fp(p).digest == file_digest(p, data)
