"""What a program can observe of a path besides its content, as the fingerprints hold it.

A traced call tells what a program *could* see: a ``stat`` sees a path's type, mode, size,
link count and times; ``open`` and ``read`` see the content (and an ``fstat`` of the open
file, which the tracer cannot see, everything a ``stat`` does); ``readdir`` sees the
entries' names and types (``d_type``); ``readlink`` sees a link's text. So:

- a file's digest is its content, permission bits and link count (:func:`file_digest`):
  ``chmod -x`` of a script, a hard link made or broken; the link count only where a
  traced call could show it (``inputs/file.py``: a ``stat`` by path), else
  :data:`NLINK_UNSEEN` in its place (:func:`without_nlink`);
- a directory's is its permission bits (:func:`dir_digest`), and whether the path itself
  is a symbolic link is part of a ``dir`` or ``list`` fingerprint (its ``link``);
- a listing's is its names and each entry's type letter (:func:`listing_digest`): a name
  that turns from a file into a folder, or into a symbolic link;
- times are not in any digest (every ``touch`` would re-run); the order of the mtimes of
  the files a run stat'ed is an input of its own (``inputs/order.py``).

Out of reach: owner and group (they differ from machine to machine and a program rarely
decides by them; ``os.access`` decides by them and the mode together), a folder's link
count (its number of subfolders), inode numbers (a re-pairing of hard links that keeps
every link count is not seen), extended attributes and ACLs, and access and change
times: ``docs/limits.md`` says so.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

import xxhash

#: ``d_type`` as a letter: a regular file, a directory, a symbolic link, anything else.
TYPE_LETTERS = "fdlo"
_S_ISREG = stat.S_ISREG
_S_ISDIR = stat.S_ISDIR
_S_ISLNK = stat.S_ISLNK


def listing_digest(
    names: Iterable[bytes], types: str | None = None, link: str | None = None
) -> tuple[str, bytes]:
    """The digest and the CAS blob of a directory listing (names in file-system bytes;
    ``types``: their type letters, in the order of the sorted names; ``link``: the text
    of the symbolic link the folder was reached through). The link is in the digest, as
    in :func:`dir_digest`, because the store interns fingerprints by path and digest."""
    blob = b"\0".join(sorted(names))
    if types is not None:
        blob += b"\0\0" + types.encode()
        if link is not None:
            blob += b"\0\0" + os.fsencode(link)
    return xxhash.xxh3_128_hexdigest(blob), blob


def split_listing(blob: bytes) -> tuple[list[str], str | None]:
    """The names and type letters of a listing's CAS blob (no letters: an old record)."""
    names, sep, rest = blob.partition(b"\0\0")
    listed = [os.fsdecode(n) for n in names.split(b"\0")] if names else []
    return listed, (rest.partition(b"\0\0")[0].decode() if sep else None)


def type_letter(mode: int) -> str:
    """The :data:`TYPE_LETTERS` letter of an ``lstat`` mode."""
    return "f" if _S_ISREG(mode) else "d" if _S_ISDIR(mode) else "l" if _S_ISLNK(mode) else "o"


def file_digest(content: str, st: os.stat_result) -> str:
    """A file's digest: its content digest, then ``:MODE:NLINK`` (octal permission bits,
    link count: ``stat`` shows both, a script's executable bit, a hard link made or
    broken), in the clear so that ``explain`` can say which changed."""
    return f"{content}:{stat.S_IMODE(st.st_mode):o}:{st.st_nlink}"


#: The link-count part of a file digest that does not hold the link count.
NLINK_UNSEEN = "*"


def without_nlink(digest: str) -> str:
    """A :func:`file_digest` with its link count replaced by :data:`NLINK_UNSEEN`."""
    head, sep, _nlink = digest.rpartition(":")
    return f"{head}:{NLINK_UNSEEN}" if sep and ":" in head else digest


def file_digest_holds(recorded: str, now: str) -> bool:
    """Whether the file digest taken ``now`` matches a ``recorded`` one: equal, or equal
    but for the link count where the recorded one does not hold it."""
    if recorded == now:
        return True
    return recorded.endswith(":" + NLINK_UNSEEN) and without_nlink(now) == recorded


def split_file_digest(digest: str) -> tuple[str, str | None]:
    """A file digest's content part and its ``MODE:NLINK`` part (None: an old record)."""
    content, sep, meta = digest.partition(":")
    return content, (meta if sep else None)


def dir_digest(st: os.stat_result, link: str | None) -> str:
    """A directory's digest: its permission bits in octal, and the text of the symbolic
    link it was reached through (the store interns fingerprints by path and digest)."""
    mode = f"{stat.S_IMODE(st.st_mode):o}"
    return mode if link is None else f"{mode} -> {link}"


def entry_letter(entry: os.DirEntry[bytes]) -> str:
    """The type letter of a listed entry, from ``d_type`` (an ``lstat`` where unknown)."""
    if entry.is_symlink():
        return "l"
    if entry.is_dir(follow_symlinks=False):
        return "d"
    return "f" if entry.is_file(follow_symlinks=False) else "o"
