"""Current fingerprints of paths, with a per-build stat cache.

A :class:`FileStates` is a snapshot of the file system for one build: each distinct path is
``lstat``'ed at most once (plus one ``stat`` when it is a symlink), each file is hashed at most
once and each directory listed at most once, however many targets share it.

Fingerprints by :class:`~memotest.model.Kind`:

``FILE``
    xxh3-128 hex digest of the content, read in :data:`CHUNK_SIZE` chunks. When the path is
    a symlink the link text is hashed too, so re-pointing a link is a change even when the
    new target has the same content.
``ABSENT``/``DIR``/``OTHER``
    no digest (:data:`NO_DIGEST`): the fingerprint is the type of what is at the path.
``LISTING``
    xxh3-128 of the directory's entry names (file-system bytes) sorted and joined by ``\\0``.
    That byte string is exactly what the store keeps in its CAS for ``explain``, so the
    listing digest is also the CAS address of the names.

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
from typing import NamedTuple

import xxhash

from memotest.model import Input, Kind, StatSig
from memotest.tracer import codemap, listings, sections

__all__ = [
    "CHUNK_SIZE",
    "NO_DIGEST",
    "RACY_WINDOW_NS",
    "UNREADABLE",
    "Counters",
    "FileStates",
    "Fingerprint",
    "Refresh",
    "StatSig",
    "describe_change",
    "is_racy",
    "listing_digest",
]

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
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
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
    ``link``: the symlink text when the path itself was a symlink (``FILE`` only).
    ``names``: for ``LISTING``, the sorted entry names, so the store can save them for
    ``explain``; not part of equality.
    """

    sig: StatSig | None = None
    verified_ns: int = 0
    link: str | None = None
    names: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def input(self) -> Input:
        """The plain :class:`~memotest.model.Input` (path, kind, digest)."""
        return Input(self.path, self.kind, self.digest)


def is_racy(sig: Sequence[int], verified_ns: int, window_ns: int = RACY_WINDOW_NS) -> bool:
    """Whether a signature ``(mtime_ns, size, ino, ctime_ns)`` is too recent to trust."""
    return max(sig[0], sig[3]) >= verified_ns - window_ns


def listing_digest(names: Iterable[bytes]) -> tuple[str, bytes]:
    """The digest and the CAS blob of a directory listing (names in file-system bytes)."""
    blob = b"\0".join(sorted(names))
    return xxhash.xxh3_128_hexdigest(blob), blob


@dataclass
class Counters:
    """What a :class:`FileStates` did, per path; tests and benchmarks read these.

    ``stat_calls`` counts the path-based stat system calls made to fill the stat cache
    (``lstat``, plus ``stat``/``readlink`` for symlinks); ``hashed`` the files read and
    hashed; ``listed`` the directories listed.
    """

    stat_calls: Counter[str] = field(default_factory=Counter)
    hashed: Counter[str] = field(default_factory=Counter)
    listed: Counter[str] = field(default_factory=Counter)


class _Hashed(NamedTuple):
    digest: str
    sig: StatSig
    verified_ns: int
    link: str | None


class _Tree(NamedTuple):
    codes: dict | Exception
    sig: StatSig
    verified_ns: int
    memo: dict  # digests taken of its code objects (``codemap``)


class _Listed(NamedTuple):
    digest: str
    names: tuple[str, ...]
    sig: StatSig
    verified_ns: int


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
        custom_digest: Callable[[str], str | None] | None = None,
    ) -> None:
        self.racy_window_ns = racy_window_ns
        #: Entries of listed directories for which this is true (given the entry's full
        #: path) are left out of listings, so that creating an ignored path such as a
        #: ``__pycache__`` folder does not change the listing of its directory.
        self.skip_entry = skip_entry
        #: A plugin's fingerprint for a regular file (``memotest_fingerprint``), or None
        #: for the default content hash.
        self.custom_digest = custom_digest
        #: Reads a blob of the store's CAS by its digest: what a ``CODE`` fingerprint
        #: names (set by the build; without it, ``CODE`` fingerprints never hold).
        self.blobs: Callable[[str], bytes] | None = None
        self.counters = Counters()
        self._trees: dict[str, _Tree] = {}
        self._lstat: dict[str, os.stat_result | None] = {}
        self._stat: dict[str, os.stat_result | None] = {}
        self._links: dict[str, str | None] = {}
        self._errors: dict[str, OSError] = {}
        self._files: dict[str, _Hashed] = {}
        self._listings: dict[str, _Listed] = {}
        # Fingerprints that held in this build, (digest, sig, verified_ns, link) by path: a
        # later fingerprint() of an unchanged path reuses them instead of hashing again.
        self._known_files: dict[str, tuple[str, Sequence[int], int, str | None]] = {}
        self._known_lists: dict[str, _Listed] = {}
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
        for p in paths:
            for cache in (self._lstat, self._stat, self._links, self._errors, self._files):
                cache.pop(p, None)  # type: ignore[attr-defined]

            self._listings.pop(p, None)

    # -- hashing and listing -------------------------------------------------------------

    def _hash_file(self, path: str) -> _Hashed:
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
            fd = os.open(path, _OPEN_FLAGS)
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
        if self.custom_digest is not None:
            digest = self.custom_digest(path) or digest
        if link is not None:
            h2 = xxhash.xxh3_128(digest.encode())
            h2.update(_LINK_MARK + os.fsencode(link))
            digest = h2.hexdigest()
        done = _Hashed(digest, sig, verified, link)
        self._files[path] = done
        return done

    def _list_dir(self, path: str) -> _Listed:
        """List the directory at ``path``, cached."""
        done = self._listings.get(path)
        if done is not None:
            return done
        bpath = os.fsencode(path)
        for _attempt in range(3):
            verified = time.time_ns()
            before = os.stat(bpath)
            self.counters.listed[path] += 1
            names = os.listdir(bpath)
            after = os.stat(bpath)
            sig = StatSig.of(before)
            if sig == StatSig.of(after):
                break
        else:
            raise OSError(errno.EAGAIN, "directory kept changing while it was listed", path)
        if self.skip_entry is not None:
            skip = self.skip_entry
            names = [n for n in names if not skip(os.path.join(path, os.fsdecode(n)))]
        digest, _blob = listing_digest(names)
        done = _Listed(digest, tuple(os.fsdecode(n) for n in sorted(names)), sig, verified)
        self._listings[path] = done
        return done

    def listing_names(self, path: str) -> list[str] | None:
        """The sorted entry names of a directory now, or None if it is not a directory."""
        st = self.stat(path)
        if st is None or not _S_ISDIR(st.st_mode):
            return None
        try:
            return list(self._list_dir(path).names)
        except OSError:
            return None

    # -- checking recorded fingerprints --------------------------------------------------

    def verify(
        self,
        path: str,
        kind: str,
        digest: str,
        sig: Sequence[int] | None = None,
        verified_ns: int = 0,
        link: str | None = None,
    ) -> bool | Refresh:
        """Whether a recorded fingerprint still holds: the hot path, fields passed flat.

        Returns ``True`` (holds), ``False`` (doesn't), or a :class:`Refresh` (holds, but had
        to be re-hashed: store the new signature so the next build takes the fast path).
        """
        if kind == "file":
            st = self.lstat(path)
            if st is None or st is UNREADABLE:
                return False
            if _S_ISLNK(st.st_mode):
                if self.readlink(path) != link:
                    return False
                st = self.stat(path)
                if st is None or st is UNREADABLE:
                    return False
            elif link is not None:
                return False
            if not _S_ISREG(st.st_mode):
                return False
            if (
                sig is not None
                and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == sig
                and max(st.st_mtime_ns, st.st_ctime_ns) < verified_ns - self.racy_window_ns
            ):
                self._known_files[path] = (digest, sig, verified_ns, link)
                return True
            kf = self._known_files.get(path)
            if (
                kf is not None
                and kf[3] == link
                and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == tuple(kf[1])
                and max(st.st_mtime_ns, st.st_ctime_ns) < kf[2] - self.racy_window_ns
            ):
                # Another fingerprint of this path was proven current by its signature: no
                # need to hash to know whether this one matches.
                if kf[0] != digest:
                    return False
                return self._refresh(sig, verified_ns, StatSig(*kf[1]), kf[2])
            try:
                done = self._hash_file(path)
            except OSError:
                return False
            if done.digest != digest:
                return False
            self._known_files[path] = done
            return self._refresh(sig, verified_ns, done.sig, done.verified_ns)
        if kind == "absent":
            return self.stat(path) is None
        if kind == "dir":
            st = self.stat(path)
            return st is not None and _S_ISDIR(st.st_mode)
        if kind == "list":
            st = self.stat(path)
            if st is None or not _S_ISDIR(st.st_mode):
                return False
            if self._sig_holds(st, sig, verified_ns):
                return True
            try:
                listed = self._list_dir(path)
            except OSError:
                return False
            if listed.digest != digest:
                return False
            self._known_lists[path] = listed
            return self._refresh(sig, verified_ns, listed.sig, listed.verified_ns)
        if kind == "other":
            st = self.stat(path)
            return st is not None and _is_other(st.st_mode)
        if kind == "code":
            return self._verify_code(path, digest, sig, verified_ns)
        if kind == "entries":
            return self._verify_entries(path, digest, sig, verified_ns)
        if kind == "section":
            return self._verify_section(path, digest, sig, verified_ns)
        return False

    def _sig_holds(self, st: os.stat_result, sig: Sequence[int] | None, verified_ns: int) -> bool:
        """The stat fast path: ``st`` has the recorded signature, and was not racily
        clean when it was verified."""
        return (
            sig is not None
            and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == tuple(sig)
            and max(st.st_mtime_ns, st.st_ctime_ns) < verified_ns - self.racy_window_ns
        )

    def _verify_section(
        self, path: str, digest: str, sig: Sequence[int] | None, verified_ns: int
    ) -> bool | Refresh:
        """A ``SECTION`` fingerprint: the stat fast path, else the part of the file its
        reader takes (``tool.pytest``, the entry points) must be as it was
        (``tracer/sections.py``)."""
        st = self.lstat(path)
        if st is None or st is UNREADABLE or not _S_ISREG(st.st_mode):
            return False
        if self._sig_holds(st, sig, verified_ns):
            return True
        verified = time.time_ns()
        try:
            with open(path, "rb") as f:
                before = os.fstat(f.fileno())
                data = f.read()
        except OSError:
            return False
        self.counters.hashed[path] += 1
        if sections.section_digest(path, data) != digest:
            return False
        return self._refresh(sig, verified_ns, StatSig.of(before), verified)

    def _verify_entries(
        self, path: str, digest: str, sig: Sequence[int] | None, verified_ns: int
    ) -> bool | Refresh:
        """An ``ENTRIES`` fingerprint: the stat fast path, else the directory's entries
        must still match what its readers looked for as they did (``tracer/listings.py``)."""
        st = self.stat(path)
        if st is None or st is UNREADABLE or not _S_ISDIR(st.st_mode):
            return False
        if self._sig_holds(st, sig, verified_ns):
            return True
        if self.entries_changed(path, digest) is not None:
            return False
        listed = self._list_dir(path)
        return self._refresh(sig, verified_ns, listed.sig, listed.verified_ns)

    def entries_changed(self, path: str, digest: str) -> tuple[list[str], list[str]] | None:
        """None if the directory's entries still match the ``ENTRIES`` fingerprint
        ``digest``, else the entries looked for that appeared and those that went
        (:func:`listings.entries_changed`)."""
        try:
            names = self._list_dir(path).names
        except OSError:
            return ["?"], []
        if self.blobs is None:
            return ["?"], []
        try:
            blob = self.blobs(digest)
        except Exception:
            return ["?"], []
        return listings.entries_changed(blob, names)

    def _verify_code(
        self, path: str, digest: str, sig: Sequence[int] | None, verified_ns: int
    ) -> bool | Refresh:
        """A ``CODE`` fingerprint: the stat fast path, else the file compiled anew must
        still have the code objects the record names, alike (``tracer/codemap.py``)."""
        st = self.lstat(path)
        if st is None or st is UNREADABLE or not _S_ISREG(st.st_mode):
            return False  # a symbolic link is never fingerprinted by its code
        if self._sig_holds(st, sig, verified_ns):
            return True
        if self.code_changed(path, digest, StatSig.of(st)) is not None:
            return False
        tree = self._trees[path]
        return self._refresh(sig, verified_ns, tree.sig, tree.verified_ns)

    def code_changed(self, path: str, digest: str, sig: StatSig | None = None) -> str | None:
        """None if the file at ``path`` still has the code the ``CODE`` fingerprint
        ``digest`` names, else what changed (:func:`codemap.changed`)."""
        try:
            tree = self.code_tree(path, sig)
        except OSError as exc:
            return f"is unreadable ({exc.strerror or exc})"
        if self.blobs is None:
            return "its code could not be compared (no store)"
        try:
            blob = self.blobs(digest)
        except Exception:
            return "the record of its code is gone from the store"
        return codemap.changed(blob, tree.codes, tree.memo)

    def code_tree(self, path: str, sig: StatSig | None = None) -> _Tree:
        """The file at ``path`` compiled (``codemap.compile_tree``). Compiled again only
        when its stat signature is not ``sig`` (or, without ``sig``, not what it was when
        last compiled) or was racily clean then."""
        done = self._trees.get(path)
        if done is not None:
            if sig is None:
                st = self.lstat(path)
                sig = StatSig.of(st) if st is not None and st is not UNREADABLE else None
            if done.sig == sig and not is_racy(done.sig, done.verified_ns, self.racy_window_ns):
                return done
        for _attempt in range(3):
            verified = time.time_ns()
            with open(path, "rb") as f:
                before = os.fstat(f.fileno())
                source = f.read()
                after = os.fstat(f.fileno())
            if StatSig.of(before) == StatSig.of(after):
                break
        else:
            raise OSError(errno.EAGAIN, "file kept changing while it was read", path)
        self.counters.hashed[path] += 1
        codes: dict | Exception
        try:
            codes = codemap.compile_tree(source, path)
        except (SyntaxError, ValueError) as exc:
            codes = exc
        done = self._trees[path] = _Tree(codes, StatSig.of(before), verified, {})
        return done

    def _refresh(
        self, old: Sequence[int] | None, old_verified: int, new: StatSig, new_verified: int
    ) -> bool | Refresh:
        """After a re-hash that matched: a Refresh if storing the new signature helps."""
        if old is not None and tuple(old) == new:
            if is_racy(new, old_verified, self.racy_window_ns) and not is_racy(
                new, new_verified, self.racy_window_ns
            ):
                return Refresh(new, new_verified)
            return True
        return Refresh(new, new_verified)

    def check(self, recorded: Input) -> bool | Refresh:
        """:meth:`verify` for an :class:`~memotest.model.Input` or :class:`Fingerprint`."""
        if isinstance(recorded, Fingerprint):
            return self.verify(
                recorded.path,
                Kind(recorded.kind).value,
                recorded.digest,
                recorded.sig,
                recorded.verified_ns,
                recorded.link,
            )
        return self.verify(recorded.path, Kind(recorded.kind).value, recorded.digest)

    def holds(self, recorded: Input) -> bool:
        """Whether a recorded input still holds (a refresh counts as holding)."""
        return self.check(recorded) is not False

    # -- taking fingerprints -------------------------------------------------------------

    def fingerprint(self, path: str, kind: Kind = Kind.FILE, *, fresh: bool = False) -> Fingerprint:
        """The current fingerprint of ``path``, observed as ``kind``.

        The kind of the result is what the path *is*: asking for ``FILE`` on a directory
        gives ``DIR``, on a missing path ``ABSENT``. ``LISTING`` lists a directory. An
        unchanged file whose fingerprint already held in this build is not hashed again.
        ``fresh=True`` re-stats (and re-hashes if needed) instead of using the snapshot.
        Raises ``OSError`` when the path exists but can't be stat'ed or read (the caller
        should then not cache the target).
        """
        if fresh:
            self.forget([path])
        st = self.stat(path)
        if st is None:
            return Fingerprint(path, Kind.ABSENT, NO_DIGEST)
        if st is UNREADABLE:
            raise self._errors.get(path) or OSError(errno.EACCES, "unreadable", path)
        mode = st.st_mode
        if _S_ISDIR(mode):
            if kind is not Kind.LISTING:
                return Fingerprint(path, Kind.DIR, NO_DIGEST)
            sig = StatSig.of(st)
            known = self._known_lists.get(path)
            if (
                known is not None
                and known.sig == sig
                and not is_racy(sig, known.verified_ns, self.racy_window_ns)
            ):
                listed = known
            else:
                listed = self._known_lists[path] = self._list_dir(path)
            return Fingerprint(
                path,
                Kind.LISTING,
                listed.digest,
                listed.sig,
                listed.verified_ns,
                None,
                listed.names,
            )
        if _S_ISREG(mode):
            sig = StatSig.of(st)
            link = self.readlink(path)
            kf = self._known_files.get(path)
            if (
                kf is not None
                and tuple(kf[1]) == sig
                and kf[3] == link
                and not is_racy(sig, kf[2], self.racy_window_ns)
            ):
                done = _Hashed(kf[0], sig, kf[2], kf[3])
            else:
                done = self._hash_file(path)
                # a later fresh fingerprint of the unchanged file (the next target that read
                # it) reuses this hash, by the same signature rule as above
                self._known_files[path] = done
            return Fingerprint(path, Kind.FILE, done.digest, done.sig, done.verified_ns, done.link)
        return Fingerprint(path, Kind.OTHER, NO_DIGEST)


def _is_other(mode: int) -> bool:
    return (
        _stat.S_ISFIFO(mode) or _stat.S_ISSOCK(mode) or _stat.S_ISCHR(mode) or _stat.S_ISBLK(mode)
    )


def _type_word(st: os.stat_result) -> str:
    if _S_ISDIR(st.st_mode):
        return "a directory"
    if _S_ISREG(st.st_mode):
        return "a regular file"
    return "a special file"


def _names_phrase(label: str, names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f" and {len(names) - limit} more"
    return f"{label}: {shown}"


def describe_change(
    recorded: Input, states: FileStates, recorded_names: Sequence[str] | None = None
) -> str | None:
    """None if ``recorded`` still holds, else a short phrase saying what changed.

    ``recorded_names`` are the entry names a ``LISTING`` had (from
    :meth:`memotest.store.Store.listing_names`, or ``recorded.names``); without them a
    changed listing is only "directory entries changed".
    """
    if states.check(recorded) is not False:
        return None
    path = recorded.path
    kind = Kind(recorded.kind)
    st = states.stat(path)
    if st is UNREADABLE:
        err = states.error(path)
        return f"is unreadable ({err.strerror if err else 'error'})"
    if kind is Kind.ABSENT:
        return "appeared"
    if st is None:
        return "disappeared"
    is_dir = _S_ISDIR(st.st_mode)
    if kind is Kind.FILE:
        if is_dir:
            return "is now a directory"
        if not _S_ISREG(st.st_mode):
            return f"is now {_type_word(st)}"
        old_link = recorded.link if isinstance(recorded, Fingerprint) else None
        new_link = states.readlink(path)
        if new_link != old_link:
            if new_link is None:
                return "is no longer a symlink"
            return f"link now points to {new_link}"
        try:  # can it be read at all? (no need to hash: the check said it differs)
            os.close(os.open(path, _OPEN_FLAGS))
        except OSError as e:
            return f"is unreadable ({e.strerror})"
        return "content changed"
    if kind is Kind.DIR:
        return "is no longer a directory" if not is_dir else None
    if kind is Kind.LISTING:
        if not is_dir:
            return "is no longer a directory"
        names = recorded_names
        if names is None and isinstance(recorded, Fingerprint):
            names = recorded.names
        current = states.listing_names(path)
        if names is None or current is None:
            return "directory entries changed"
        old, new = set(names), set(current)
        parts = []
        gained = sorted(new - old)
        lost = sorted(old - new)
        if gained:
            parts.append(_names_phrase("directory gained entries", gained))
        if lost:
            parts.append(
                _names_phrase("lost entries" if gained else "directory lost entries", lost)
            )
        return "; ".join(parts) or "directory entries changed"
    if kind is Kind.OTHER:
        return f"is now {_type_word(st)}"
    if kind is Kind.CODE:
        if not _S_ISREG(st.st_mode):
            return f"is now {_type_word(st)}"
        return states.code_changed(path, recorded.digest) or "changed"
    if kind is Kind.SECTION:
        if not _S_ISREG(st.st_mode):
            return f"is now {_type_word(st)}"
        try:
            with open(path, "rb") as f:
                now = sections.section_digest(path, f.read())
        except OSError as e:
            return f"is unreadable ({e.strerror})"
        if now == sections.UNPARSED:
            if recorded.digest.startswith(sections.ENTRY_POINTS):
                return "no longer parses as entry points"
            if recorded.digest.startswith(sections.GZIP_DATA):
                return "is no longer a gzip file"
            return "no longer parses as TOML (pytest reads its [tool.pytest] table)"
        return f"{sections.section_phrase(recorded.digest)} changed"
    if kind is Kind.ENTRIES:
        if not is_dir:
            return "is no longer a directory"
        change = states.entries_changed(path, recorded.digest)
        if change is None:
            return "changed"
        gained, lost = change
        if gained == ["?"]:
            return "its entries could not be compared"
        parts = []
        if gained:
            parts.append(
                _names_phrase("directory gained entries an import or a lookup finds", gained)
            )
        if lost:
            label = (
                "lost entries" if gained else "directory lost entries an import or a lookup found"
            )
            parts.append(_names_phrase(label, lost))
        return "; ".join(parts) or "changed"
    return "changed"
