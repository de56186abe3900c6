"""Current fingerprints of paths, with a per-build stat cache.

A :class:`FileStates` is a snapshot of the file system for one build: each distinct path is
``lstat``'ed at most once (plus one ``stat`` when it is a symlink), each file is hashed at most
once and each directory listed at most once, however many targets share it. It knows
nothing of input kinds: each kind (``memotest/inputs/``) checks its recorded ones against it.

What it takes of a path, by what the path is:

``FILE``
    xxh3-128 of the content, read in :data:`CHUNK_SIZE` chunks, then ``:MODE:NLINK``, its
    permission bits and link count (``observable.py`` says why, ``inputs/file.py`` where
    the count is dropped). A symlink's text is hashed with the content (re-pointing it counts).
``DIR``
    the permission bits, in octal; the link text if the path is a symlink (``link``).
``ABSENT``/``OTHER``
    no digest (:data:`NO_DIGEST`): the fingerprint is the type of what is at the path.
``LISTING``
    xxh3-128 of the entry names (file-system bytes) sorted and joined by ``\\0``, then
    ``\\0\\0`` and one type letter per entry (``d_type``). That byte string is what the
    store keeps in its CAS for ``explain``, so the digest is also the CAS address of the
    entries. A change of mode, link count or type moves a ``ctime`` (or the folder's
    ``mtime``), so the stat fast path below still holds.

The stat fast path: a stored :class:`Fingerprint` carries the stat signature
(:class:`StatSig`) of what was hashed and ``verified_ns``, the wall clock just before it was
hashed. It still holds without hashing when the signature is identical and the file is not
*racily clean*: a file whose ``mtime`` **or** ``ctime`` is not older than
``verified_ns - RACY_WINDOW_NS`` may have been modified in the same timestamp tick as the
hash, so its signature proves nothing and it is hashed again. (Git looks at ``mtime`` only;
we also look at ``ctime`` because ``ctime`` is the one stamp nobody can set back: with
``mtime`` alone, an edit that keeps the size and restores ``mtime`` with ``os.utime`` within
one ``ctime`` tick of the hash would go unseen.)
"""

from __future__ import annotations

import errno
import os
import stat as _stat
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import xxhash

from memotest.model import Input, Kind, StatSig
from memotest.world.observable import dir_digest, entry_letter, file_digest, listing_digest

#: Timestamps this close to ``verified_ns`` (or later) can't be trusted: 2 s covers the
#: coarsest common file systems (FAT's 2 s mtime, 1 s on ext3/HFS+/some NFS servers).
RACY_WINDOW_NS = 2_000_000_000

#: Files are hashed in chunks of this many bytes.
CHUNK_SIZE = 1 << 20

#: The digest of the kinds that have none (``ABSENT``, ``DIR``, ``OTHER``).
NO_DIGEST = ""

#: What :meth:`FileStates.stat` returns for a path that exists but can't be stat'ed (EACCES,
#: ELOOP, ENAMETOOLONG...). Its mode has no type bits, so it is not a file, a directory, a
#: special file nor absent: it never matches any recorded fingerprint.
UNREADABLE = os.stat_result((0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

_MISSING_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR})
_LINK_MARK = b"\0symlink\0"
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_S_ISREG = _stat.S_ISREG
_S_ISDIR = _stat.S_ISDIR
_S_ISLNK = _stat.S_ISLNK
_NOT_CACHED = object()


class Refresh(NamedTuple):
    """A fingerprint that still holds but was re-hashed: the signature to store instead."""

    sig: StatSig
    verified_ns: int


@dataclass(frozen=True)
class Fingerprint(Input):
    """An :class:`~memotest.model.Input` plus what makes re-checking it cheap.

    ``sig``/``verified_ns``: the stat signature of what was hashed or listed and the wall
    clock (``time.time_ns()``) just before; ``None``/0 when unknown (always re-hashed).
    ``link``: the symlink text when the path itself was a symlink (``FILE``, ``DIR``,
    ``LISTING``). ``names``/``types``: for ``LISTING``, the sorted entry names and their
    type letters, so the store can save them for ``explain``; not part of equality.
    """

    sig: StatSig | None = None
    verified_ns: int = 0
    link: str | None = None
    names: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    types: str | None = field(default=None, compare=False, repr=False)

    @property
    def input(self) -> Input:
        """The plain :class:`~memotest.model.Input` (path, kind, digest)."""
        return Input(self.path, self.kind, self.digest)


def is_racy(sig: Sequence[int], verified_ns: int, window_ns: int = RACY_WINDOW_NS) -> bool:
    """Whether a signature ``(mtime_ns, size, ino, ctime_ns)`` is too recent to trust."""
    return max(sig[0], sig[3]) >= verified_ns - window_ns


@dataclass
class Counters:
    """What a :class:`FileStates` did, per path (tests and benchmarks read these): the
    path-based stat calls made to fill the stat cache (``lstat``, plus ``stat``/``readlink``
    for symlinks), the files read and hashed, the directories listed."""

    stat_calls: Counter[str] = field(default_factory=Counter)
    hashed: Counter[str] = field(default_factory=Counter)
    listed: Counter[str] = field(default_factory=Counter)


class Hashed(NamedTuple):
    """A file as hashed: its digest, the signature and clock it was hashed with, its link."""

    digest: str
    sig: StatSig
    verified_ns: int
    link: str | None


class Listed(NamedTuple):
    """A directory as listed: the digest of its entries, the names, signature and clock,
    and the type letters of the names."""

    digest: str
    names: tuple[str, ...]
    sig: StatSig
    verified_ns: int
    types: str = ""


class FileStates:
    """The file system as seen by one build, cached.

    Use one per build for planning. It is a snapshot: to fingerprint a target's inputs
    *after* it ran, pass ``fresh=True`` to :meth:`fingerprint` (or :meth:`forget` the paths
    first) so that what the target and its neighbours changed is seen. It may be shared by
    threads (the caches are plain dicts: a race costs duplicate work, never a wrong answer).
    """

    def __init__(
        self,
        racy_window_ns: int = RACY_WINDOW_NS,
        skip_entry: Callable[[str], bool] | None = None,
    ) -> None:
        self.racy_window_ns = racy_window_ns
        #: The wall clock before any path was stat'ed: every cached stat is newer.
        self.created_ns = time.time_ns()
        #: Entries of listed folders for which this is true (given the entry's full path)
        #: are left out of listings: an ignored ``__pycache__`` made changes no listing.
        self.skip_entry = skip_entry
        #: Reads a blob of the store's CAS by its digest: what the digests of some kinds
        #: name (set by the build; without it, those fingerprints never hold); ``local``
        #: makes a path stored in such a blob this machine's (:mod:`memotest.world.roots`).
        self.blobs: Callable[[str], bytes] | None = None
        self.local: Callable[[str], str] = str
        #: What the input kinds derive, per build (a compiled file by path), by kind name.
        self.derived: dict[str, dict[str, Any]] = {}
        self.counters = Counters()
        self._lstat: dict[str, os.stat_result | None] = {}
        self._stat: dict[str, os.stat_result | None] = {}
        self._links: dict[str, str | None] = {}
        self._errors: dict[str, OSError] = {}
        self._files: dict[str, Hashed] = {}
        self._listings: dict[str, Listed] = {}
        #: Fingerprints that held in this build, (digest, sig, verified_ns, link) by path:
        #: a later fingerprint() of an unchanged path reuses them instead of hashing again.
        self.known_files: dict[str, tuple[str, Sequence[int], int, str | None]] = {}
        #: Listings that held in this build, by path (the same for directories).
        self.known_lists: dict[str, Listed] = {}
        self._local = threading.local()  # a read buffer per thread

    # -- the stat cache -------------------------------------------------------------------

    def lstat(self, path: str) -> os.stat_result | None:
        """``os.lstat``, cached: None if absent (ENOENT/ENOTDIR), :data:`UNREADABLE` on errors."""
        st = self._lstat.get(path, _NOT_CACHED)
        if st is not _NOT_CACHED:
            return st  # type: ignore[return-value]
        calls = self.counters.stat_calls
        calls[path] = calls.get(path, 0) + 1  # not Counter's += (a Python-level __missing__)
        try:
            res: os.stat_result | None = os.lstat(path)
        except OSError as e:
            if e.errno in _MISSING_ERRNOS:
                res = None
            else:
                self._errors[path] = e
                res = UNREADABLE
        except ValueError as e:  # embedded NUL byte
            self._errors[path] = OSError(errno.EINVAL, str(e), path)
            res = UNREADABLE
        self._lstat[path] = res
        return res

    def stat(self, path: str) -> os.stat_result | None:
        """``os.stat`` (following symlinks), cached; same conventions as :meth:`lstat`.

        For a path that is not a symlink this is the ``lstat`` result: one system call.
        """
        st = self.lstat(path)
        if st is None or st is UNREADABLE or not _S_ISLNK(st.st_mode):
            return st
        res = self._stat.get(path, _NOT_CACHED)
        if res is not _NOT_CACHED:
            return res  # type: ignore[return-value]
        self.counters.stat_calls[path] += 1
        try:
            res = os.stat(path)
        except OSError as e:
            if e.errno in _MISSING_ERRNOS:
                res = None  # a dangling link: open() says ENOENT
            else:
                self._errors[path] = e
                res = UNREADABLE
        self._stat[path] = res
        return res  # type: ignore[return-value]

    def readlink(self, path: str) -> str | None:
        """The link text if the path itself is a symlink, else None; cached."""
        st = self.lstat(path)
        if st is None or st is UNREADABLE or not _S_ISLNK(st.st_mode):
            return None
        if path in self._links:
            return self._links[path]
        self.counters.stat_calls[path] += 1
        try:
            link: str | None = os.readlink(path)
        except OSError:
            link = None
        self._links[path] = link
        return link

    def error(self, path: str) -> OSError | None:
        """The error that made ``path`` :data:`UNREADABLE`, if any."""
        return self._errors.get(path)

    def forget(self, paths: Iterable[str]) -> None:
        """Drop what is cached about these paths (they may have changed since)."""
        caches = (self._lstat, self._stat, self._links, self._errors, self._files, self._listings)
        for p in paths:
            for cache in caches:
                cache.pop(p, None)  # type: ignore[attr-defined]

    # -- hashing and listing -------------------------------------------------------------

    def hash_file(self, path: str) -> Hashed:
        """Hash the file at ``path`` (following a symlink; its text is hashed too), cached."""
        done = self._files.get(path)
        if done is not None:
            return done
        link = self.readlink(path)
        buf = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = bytearray(CHUNK_SIZE)
        view = memoryview(buf)
        for _attempt in range(3):
            verified = time.time_ns()
            fd = os.open(path, OPEN_FLAGS)
            try:
                before = os.fstat(fd)
                if not _S_ISREG(before.st_mode):
                    raise OSError(errno.EINVAL, "not a regular file", path)
                self.counters.hashed[path] += 1
                h = xxhash.xxh3_128()
                while n := os.readv(fd, [buf]):
                    h.update(view[:n])
                after = os.fstat(fd)
            finally:
                os.close(fd)
            sig = StatSig.of(before)
            if sig == StatSig.of(after):
                break
        else:
            raise OSError(errno.EAGAIN, "file kept changing while it was hashed", path)
        digest = h.hexdigest()
        if link is not None:
            h2 = xxhash.xxh3_128(digest.encode())
            h2.update(_LINK_MARK + os.fsencode(link))
            digest = h2.hexdigest()
        digest = file_digest(digest, before)
        done = Hashed(digest, sig, verified, link)
        self._files[path] = done
        return done

    def list_dir(self, path: str) -> Listed:
        """List the directory at ``path``, cached."""
        done = self._listings.get(path)
        if done is not None:
            return done
        bpath = os.fsencode(path)
        for _attempt in range(3):
            verified = time.time_ns()
            before = os.stat(bpath)
            self.counters.listed[path] += 1
            with os.scandir(bpath) as it:
                entries = [(e.name, entry_letter(e)) for e in it]
            after = os.stat(bpath)
            sig = StatSig.of(before)
            if sig == StatSig.of(after):
                break
        else:
            raise OSError(errno.EAGAIN, "directory kept changing while it was listed", path)
        if self.skip_entry is not None:
            skip = self.skip_entry
            entries = [e for e in entries if not skip(os.path.join(path, os.fsdecode(e[0])))]
        entries.sort()
        types = "".join(t for _n, t in entries)
        digest, _blob = listing_digest((n for n, _t in entries), types, self.readlink(path))
        names = tuple(os.fsdecode(n) for n, _t in entries)
        done = Listed(digest, names, sig, verified, types)
        self._listings[path] = done
        return done

    def listing_names(self, path: str) -> list[str] | None:
        """The sorted entry names of a directory now, or None if it is not a directory."""
        st = self.stat(path)
        if st is None or not _S_ISDIR(st.st_mode):
            return None
        try:
            return list(self.list_dir(path).names)
        except OSError:
            return None

    # -- taking fingerprints -------------------------------------------------------------

    def fingerprint(
        self, path: str, observed: Kind = Kind.FILE, *, fresh: bool = False
    ) -> Fingerprint:
        """The current fingerprint of ``path``, observed as ``observed``.

        The kind of the result is what the path *is*: asking for ``FILE`` on a directory
        gives ``DIR``, on a missing path ``ABSENT``. Only an observed ``LISTING`` lists a
        directory. An unchanged file whose fingerprint already held in this build is not
        hashed again. ``fresh=True`` re-stats (and re-hashes if needed) instead of using the
        snapshot. Raises ``OSError`` when the path exists but can't be stat'ed or read (the
        caller should then not cache the target).
        """
        if fresh:
            self.forget((path,))
        st = self.stat(path)
        if st is None:
            return Fingerprint(path, Kind.ABSENT, NO_DIGEST)
        if st is UNREADABLE:
            raise self._errors.get(path) or OSError(errno.EACCES, "unreadable", path)
        mode = st.st_mode
        if _S_ISDIR(mode):
            if observed is not Kind.LISTING:
                link = self.readlink(path)
                return Fingerprint(path, Kind.DIR, dir_digest(st, link), link=link)
            sig = StatSig.of(st)
            known = self.known_lists.get(path)
            if (
                known is not None
                and known.sig == sig
                and not is_racy(sig, known.verified_ns, self.racy_window_ns)
            ):
                listed = known
            else:
                listed = self.known_lists[path] = self.list_dir(path)
            return Fingerprint(
                path,
                Kind.LISTING,
                listed.digest,
                listed.sig,
                listed.verified_ns,
                self.readlink(path),
                listed.names,
                listed.types,
            )
        if _S_ISREG(mode):
            mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
            sig = StatSig(mtime, st.st_size, st.st_ino, ctime)
            # st is the lstat of a path that is no symlink: it has no link text
            link = None if self._lstat.get(path) is st else self.readlink(path)
            kf = self.known_files.get(path)
            if (
                kf is not None
                and kf[3] == link
                and tuple(kf[1]) == sig
                and (mtime if mtime > ctime else ctime) < kf[2] - self.racy_window_ns
            ):  # the known hash still holds (is_racy, inlined)
                return Fingerprint(path, Kind.FILE, kf[0], sig, kf[2], link)
            done = self.hash_file(path)
            # a later fresh fingerprint of the unchanged file (the next target that read
            # it) reuses this hash, by the same signature rule as above
            self.known_files[path] = done
            return Fingerprint(path, Kind.FILE, done.digest, done.sig, done.verified_ns, done.link)
        return Fingerprint(path, Kind.OTHER, NO_DIGEST)
