"""Content-addressed blobs: logs, declared outputs, directory listings, code and entry records.

A blob is named by the xxh3-128 hex digest of its content. :class:`BlobStore` is what the
rest of the store asks of a place that keeps blobs; :class:`LocalBlobStore` is the one in
``.memotest/cas/ab/cd...`` (the first two hex digits name a folder). On disk a blob is one
tag byte, ``P`` (plain) or ``Z`` (zlib, when it pays), then the content.

Crash safety: a blob is written to a temporary file (``.tmp-...``) and renamed into place,
so another process sees it under its digest only whole; callers store blobs *before* the
transaction of the record that references them. Blobs are not ``fsync``'ed (as ccache
does not): the store is a cache, and every read verifies the digest
(:class:`CorruptBlob`), so a blob a power loss left empty, cut short or gone reads as a
miss, never as a wrong hit: the target it belonged to runs, and the run stores it anew
(``tests/test_store_damage.py``: emptied, garbled, truncated and missing blobs). Syncing
each blob cost 5-15 ms of every run's recording (``docs/benchmarks.md``). A file or a
dangling symlink where a folder of blobs should be is deleted when a blob is written there.
Stray temporary files of a killed writer are removed by :meth:`LocalBlobStore.sweep`.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import xxhash

from memotest.store.errors import CorruptBlob

#: The blobs folder's name in the store's folder.
CAS_DIR = "cas"
#: How much of a file is read at a time.
CHUNK = 1 << 20

_BLOB_PLAIN = b"P"
_BLOB_ZLIB = b"Z"
_TMP_PREFIX = ".tmp-"
_DIGEST_RE = re.compile(r"[0-9a-f]{3,64}")


class BlobStore(Protocol):
    """A place that keeps content-addressed blobs (xxh3-128 hex digests)."""

    def has(self, digest: str) -> bool:
        """Whether the blob of ``digest`` is kept."""
        ...

    def put(self, data: bytes) -> str:
        """Keep ``data``; returns its digest. Complete when it returns (not synced to disk:
        the module doc)."""
        ...

    def put_file(self, path: str | os.PathLike[str]) -> str:
        """Keep the content of the file at ``path`` (streamed); returns its digest."""
        ...

    def read(self, digest: str) -> bytes:
        """The content of ``digest``, verified (:class:`CorruptBlob`); ``FileNotFoundError``
        if it is not kept, ``ValueError`` if ``digest`` is not one."""
        ...


class LocalBlobStore:
    """The blobs in a local folder (``.memotest/cas``): a :class:`BlobStore`."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._dir = str(directory)
        #: The blobs this object wrote, or found whole when asked to write them: a put of
        #: one of them again (a module's code record, run after run) neither reads nor
        #: writes it. One damaged since is a miss when read (the module doc), and is then
        #: forgotten here.
        self._whole: set[str] = set()

    def path(self, digest: str) -> Path:
        """Where the blob of ``digest`` lives (whether or not it exists)."""
        return Path(self._name(digest))

    def _name(self, digest: str) -> str:
        if not _DIGEST_RE.fullmatch(digest):
            raise ValueError(f"not a blob digest: {digest!r}")
        return f"{self._dir}/{digest[:2]}/{digest[2:]}"

    def has(self, digest: str) -> bool:
        return os.path.isfile(self._name(digest))

    def put(self, data: bytes) -> str:
        digest = xxhash.xxh3_128_hexdigest(data)
        if digest in self._whole:
            return digest
        dest = self.path(digest)
        if self._intact(digest):
            self._whole.add(digest)
            return digest
        chunks = [_BLOB_PLAIN, data]
        if len(data) > 64 and _compressible(data):
            packed = zlib.compress(data, 6)
            if len(packed) < len(data) * 0.9:
                chunks = [_BLOB_ZLIB, packed]
        self._write_atomic(dest, chunks)
        self._whole.add(digest)
        return digest

    def _write_atomic(self, dest: Path, chunks: Iterable[bytes]) -> None:
        _make_folder(dest.parent)
        tmp = dest.parent / f"{_TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{dest.name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                for c in chunks:
                    f.write(c)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, dest)

    def put_file(self, path: str | os.PathLike[str]) -> str:
        _make_folder(self.dir)
        tmp = self.dir / f"{_TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{time.time_ns()}"
        h = xxhash.xxh3_128()
        try:
            with open(path, "rb") as src, open(tmp, "wb") as out:
                first = src.read(CHUNK)
                h.update(first)
                comp = None
                if len(first) > 64 and _compressible(first):
                    comp = zlib.compressobj(6)
                    out.write(_BLOB_ZLIB)
                    out.write(comp.compress(first))
                else:
                    out.write(_BLOB_PLAIN)
                    out.write(first)
                while chunk := src.read(CHUNK):
                    h.update(chunk)
                    out.write(comp.compress(chunk) if comp else chunk)
                if comp is not None:
                    out.write(comp.flush())
            digest = h.hexdigest()
            dest = self.path(digest)
            if self._intact(digest):
                os.unlink(tmp)
            else:
                _make_folder(dest.parent)
                os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return digest

    def _intact(self, digest: str) -> bool:
        """Whether blob ``digest`` is there and whole: a damaged one is written anew by the
        put that meets it, so a run that makes it again heals it (puts come after runs,
        never on the no-op path, so reading what is there costs a run's time only)."""
        if not os.path.isfile(self._name(digest)):
            return False
        try:
            self.read(digest)
        except (CorruptBlob, OSError):
            return False
        return True

    def read(self, digest: str) -> bytes:
        try:
            return self._read(digest)
        except (CorruptBlob, OSError):
            self._whole.discard(digest)
            raise

    def _read(self, digest: str) -> bytes:
        try:
            raw = self.path(digest).read_bytes()
        except (IsADirectoryError, NotADirectoryError):
            raise CorruptBlob(f"blob {digest} is not a file", digest) from None
        tag, body = raw[:1], raw[1:]
        if tag == _BLOB_ZLIB:
            try:
                data = zlib.decompress(body)
            except zlib.error as e:
                raise CorruptBlob(f"blob {digest} is corrupt: {e}", digest) from None
        elif tag == _BLOB_PLAIN:
            data = body
        else:
            raise CorruptBlob(f"blob {digest} has an unknown format", digest)
        if xxhash.xxh3_128_hexdigest(data) != digest:
            raise CorruptBlob(f"blob {digest} does not match its digest", digest)
        return data

    def sizes(self) -> dict[str, int]:
        """The bytes each kept blob takes on disk, by digest (for the store's size bound)."""
        out: dict[str, int] = {}
        if self.dir.is_dir():
            for sub in os.scandir(self.dir):
                if not sub.is_dir(follow_symlinks=False):
                    continue
                for f in os.scandir(sub.path):
                    if not f.name.startswith(_TMP_PREFIX):
                        with contextlib.suppress(OSError):
                            out[sub.name + f.name] = f.stat(follow_symlinks=False).st_size
        return out

    def sweep(self, keep: set[str]) -> tuple[int, int]:
        """Delete every blob whose digest is not in ``keep``, and stray temporary files;
        returns (files deleted, their bytes)."""
        self._whole.clear()
        doomed: list[Path] = []
        if self.dir.is_dir():
            for sub in self.dir.iterdir():
                if not sub.is_dir():
                    if sub.name.startswith(_TMP_PREFIX):
                        doomed.append(sub)
                    continue
                for f in sub.iterdir():
                    if f.name.startswith(_TMP_PREFIX) or sub.name + f.name not in keep:
                        doomed.append(f)
        count = size = 0
        for f in doomed:
            with contextlib.suppress(OSError):
                n = f.stat().st_size
                f.unlink()
                count += 1
                size += n
        return count, size


def _make_folder(path: Path) -> None:
    """Make the folder ``path``, first deleting what is in its place (a file, a dangling
    symlink: damage, and a blob store may delete what it finds among its own files)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        path.unlink()
        path.mkdir(parents=True, exist_ok=True)


def _compressible(data: bytes) -> bool:
    """Whether zlib is worth it, judged on a 64 KiB sample (logs yes, random or packed no)."""
    sample = data[: 1 << 16]
    return len(zlib.compress(sample, 1)) < len(sample) * 0.9
