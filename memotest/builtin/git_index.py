"""A git index (``.git/index``) by what git decides with it: its entries, without the
stat data it caches of each work-tree file.

Every ``git`` command that looks at the work tree (``git status``, ``git describe
--dirty``, pytest-benchmark's commit information) reads the index and compares each
tracked file's ``lstat`` with the stat data cached in its entry; when they differ it
hashes the file, and when the content is the entry's it writes the index again with the
new stat data (a *refresh*). A commit, a checkout and a fresh clone leave entries whose
stat data a later refresh rewrites. As a whole file, the index was then an input that the
run itself changed (``rewritten.py``): the run after any commit was not reusable and a
target settled only at its third build; and no two clones have the same stat data, so a
record from another clone (a remote cache) never held.

What git answers depends on the entries (path, mode, object id, stage and flags) and on
the work-tree files, which the run's own observations hold; the stat data only tells git
which files it may skip hashing, and git smudges the entries whose file is not older than
the index (the "racy git" rule) so that the answer is the one hashing gives. So the index
holds by its entries and by its extensions but the caches derived from the entries and
the file system (``TREE``, ``UNTR``, ``FSMN``, ``EOIE``, ``IEOT``). Out of reach
(``docs/limits.md``): a program that reads the cached stat data itself (``git ls-files
--debug``, a library's index entries' ``mtime``) is replayed when only it changed. An
index that does not parse as a SHA-1 index of version 2, 3 or 4 (a split index, a SHA-256
repository) stays whole.
"""

from __future__ import annotations

import hashlib
import struct

from memotest.inputs.readers import UNPARSED, part_digest

NAME = "git-index"
#: Extensions that cache what the entries and the file system already say.
_DERIVED = {b"TREE", b"UNTR", b"FSMN", b"EOIE", b"IEOT"}
_STAT = 40  # ctime, mtime (seconds, nanoseconds), dev, ino, mode, uid, gid, size
_OID = 20  # SHA-1
_EXTENDED = 0x4000


def is_git_index(path: str) -> bool:
    """``.git/index``, or a linked work tree's ``.git/worktrees/NAME/index``."""
    parts = path.rsplit("/", 4)
    return path.endswith("/.git/index") or (
        len(parts) == 5 and parts[-4:-2] == [".git", "worktrees"] and parts[-1] == "index"
    )


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (``read_varint`` of ``varint.c``)."""
    c = data[pos]
    pos += 1
    value = c & 0x7F
    while c & 0x80:
        value += 1
        c = data[pos]
        pos += 1
        value = (value << 7) + (c & 0x7F)
    return value, pos


def git_index_digest(data: bytes, path: str) -> str:
    """The digest of the index's entries without their stat data, and of its extensions
    but the derived ones; :data:`UNPARSED` for anything else."""
    if not is_git_index(path) or len(data) < 32 or data[:4] != b"DIRC":
        return UNPARSED
    if hashlib.sha1(data[:-20]).digest() != data[-20:]:
        return UNPARSED  # not whole, or not a SHA-1 index
    try:
        return _digest(data)
    except (IndexError, struct.error, ValueError):
        return UNPARSED


def _digest(data: bytes) -> str:
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        return UNPARSED
    end = len(data) - 20
    pos = 12
    kept = [data[4:12]]
    name = b""
    for _ in range(count):
        start = pos
        mode = data[pos + 24 : pos + 28]
        pos += _STAT
        oid = data[pos : pos + _OID]
        pos += _OID
        (flags,) = struct.unpack_from(">H", data, pos)
        pos += 2
        extra = b""
        if flags & _EXTENDED:
            if version < 3:
                return UNPARSED
            extra = data[pos : pos + 2]
            pos += 2
        if version == 4:
            strip, pos = _varint(data, pos)
            if strip > len(name):
                return UNPARSED
            nul = data.index(b"\0", pos)
            name = name[: len(name) - strip] + data[pos:nul]
            pos = nul + 1
        else:
            nul = data.index(b"\0", pos)
            name = data[pos:nul]
            pos = start + ((nul - start + 8) & ~7)  # 1 to 8 NULs to a multiple of 8
        if pos > end:
            return UNPARSED
        kept += [mode, oid, struct.pack(">H", flags), extra, name, b"\0"]
    while pos < end:
        sig = data[pos : pos + 4]
        (size,) = struct.unpack_from(">I", data, pos + 4)
        body = data[pos + 8 : pos + 8 + size]
        pos += 8 + size
        if pos > end or sig == b"link":
            return UNPARSED  # torn, or a split index (its entries are in another file)
        if sig not in _DERIVED:
            kept += [sig, struct.pack(">I", size), body]
    if pos != end:
        return UNPARSED
    return part_digest(NAME, b"".join(kept))
