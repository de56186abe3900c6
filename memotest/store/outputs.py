"""Declared outputs: how a record names them, and putting them back on replay.

A record's ``outputs`` maps each declared output's path (relative to the target's folder)
to the digest of its blob, marked with :data:`EXECUTABLE_MARK` when the file was
executable. Replaying writes each file back atomically (temporary file, fsync, rename), and
leaves alone a file that already has the content (and mode) asked for.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import xxhash

from memotest.model import output_problem
from memotest.store.blobs import CHUNK, BlobStore
from memotest.store.errors import StoreError

#: How a record's ``outputs`` mark an executable file: its value is the digest plus this.
EXECUTABLE_MARK = "+x"


def output_value(digest: str, executable: bool) -> str:
    """The value of an ``outputs`` entry: the blob's digest, marked when executable."""
    return digest + EXECUTABLE_MARK if executable else digest


def split_output(value: str) -> tuple[str, bool]:
    """An ``outputs`` value as (digest, executable)."""
    if value.endswith(EXECUTABLE_MARK):
        return value[: -len(EXECUTABLE_MARK)], True
    return value, False


def restore_outputs(blobs: BlobStore, outputs: dict[str, str], cwd: str) -> None:
    """Put a record's declared outputs (``Record.outputs``) back under ``cwd``.

    A record naming an output that is not a plain path below ``cwd`` (absolute, or with
    ``..``: a record made elsewhere, or tampered with) restores nothing: a replay never
    writes outside the target's folder (:class:`StoreError`)."""
    for rel in outputs:
        problem = output_problem(rel)
        if problem:
            raise StoreError(f"a record names an output that is not restored: {problem}")
    for rel, value in outputs.items():
        digest, executable = split_output(value)
        restore_file(blobs, digest, os.path.join(cwd, rel), executable)


def restore_file(
    blobs: BlobStore, digest: str, path: str | os.PathLike[str], executable: bool | None = None
) -> bool:
    """Write the blob ``digest`` to ``path`` atomically; False if it already had it.

    ``executable`` (an ``outputs`` value's mark, :func:`split_output`) sets or clears
    the execute bits where the file is readable; None keeps the file's mode."""
    dest = Path(path)
    try:
        with open(dest, "rb") as f:
            h = xxhash.xxh3_128()
            while chunk := f.read(CHUNK):
                h.update(chunk)
        if h.hexdigest() == digest:
            mode = os.stat(dest).st_mode & 0o7777
            if executable is None or _with_exec(mode, executable) == mode:
                return False
            os.chmod(dest, _with_exec(mode, executable))
            return True
    except OSError:
        pass
    data = blobs.read(digest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o666 & ~_umask()
    with contextlib.suppress(OSError):
        mode = os.stat(dest).st_mode & 0o7777
    if executable is not None:
        mode = _with_exec(mode, executable)
    tmp = dest.parent / f".{dest.name}.memotest-{os.getpid()}-{threading.get_ident()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def _with_exec(mode: int, executable: bool) -> int:
    """``mode`` with execute bits wherever it has read bits (``chmod +x``), or none."""
    if executable:
        return mode | ((mode & 0o444) >> 2)
    return mode & ~0o111


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it; put back at once
    os.umask(mask)
    return mask
