"""A damaged store: how it is recognised, and how a build sets it aside and goes on.

The store is a cache, so damage never stops a build and never yields a hit. What counts as
damage (:func:`is_damage`): any SQLite error but those that say nothing about the file
(busy, locked, out of memory, interrupted, disk full), a row that does not decode
(:class:`Garbled`), a part of the layout that is not what it should be (``.memotest`` or
``cas`` a file or a dangling symlink, the database a folder), and a blob that does not
hash to its name (:class:`~memotest.store.errors.CorruptBlob`).

What the store does about it (:meth:`memotest.store.Store.open` and the store's guard):

- with the build lock (a build, ``run_memoized``, ``clean --gc``): the damaged part is
  moved into ``.memotest/damaged-<time>/`` (:func:`set_aside`; ``memotest clean`` removes
  it), one line on stderr says what and where, a fresh part is made and the operation is
  tried again on it: the records it held are gone, so their targets run;
- a blob that does not hash to its name is deleted when met (so the next run stores it
  anew) and the target it belonged to runs;
- without the lock (``list``, ``show``, ``explain``, ``graph``, ``build -n``):
  :class:`~memotest.store.errors.StoreDamaged`, whose message says what is wrong and to
  run ``memotest clean`` (exit 2).

Errors that are not damage (a full disk) become a plain
:class:`~memotest.store.errors.StoreError`: a target that already ran keeps its result,
not cached, with the reason (:meth:`memotest.drive.step.Step.record`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import time
import zlib
from pathlib import Path

from memotest.store.errors import CorruptBlob, StoreError
from memotest.store.lock import LOCK_FILE, acquire_lock, release_lock

#: The prefix of the folders, in the store, that hold what a build set aside.
DAMAGED_PREFIX = "damaged-"
#: How many of those folders a build keeps (the oldest go first).
KEEP_DAMAGED = 3

# SQLite's primary result codes that say nothing about the database file itself.
_NOT_DAMAGE_CODES = {5, 6, 7, 9, 13}  # BUSY, LOCKED, NOMEM, INTERRUPT, FULL
_NOT_DAMAGE_WORDS = ("locked", "busy", "out of memory", "interrupted", "disk is full")


class Garbled(StoreError):
    """A stored row that does not decode (a record's JSON, its compressed arrays)."""


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc``, met while using the store, means the store is damaged."""
    if isinstance(exc, (Garbled, CorruptBlob, zlib.error)):
        return True
    if isinstance(exc, (sqlite3.DatabaseError, sqlite3.InterfaceError)):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF not in _NOT_DAMAGE_CODES
        text = str(exc).lower()
        return not any(w in text for w in _NOT_DAMAGE_WORDS)
    return False


def is_store_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an error of the store's database or rows (damage or not)."""
    return is_damage(exc) or isinstance(exc, sqlite3.Error)


def describe(exc: BaseException) -> str:
    """``exc`` in a few words, for the one line that reports it."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def not_a_folder(path: Path) -> str | None:
    """Why ``path``, which should be a folder, is not one (None if it is one or is absent)."""
    if os.path.isdir(path):
        return None
    if os.path.islink(path):
        return f"{path.name} is a dangling symlink"
    if os.path.lexists(path):
        return f"{path.name} is a file, not a folder"
    return None


def set_aside(store_dir: Path, parts: list[Path], why: str) -> Path:
    """Move ``parts`` (those that exist) of the store into a new ``damaged-<time>`` folder
    of ``store_dir`` and say so on stderr, once; returns that folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = store_dir / f"{DAMAGED_PREFIX}{stamp}"
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = store_dir / f"{DAMAGED_PREFIX}{stamp}-{n}"
    aside.mkdir(parents=True)
    for part in parts:
        with contextlib.suppress(FileNotFoundError):
            os.replace(part, aside / part.name)
    _prune(store_dir)
    warn(
        f"the store is damaged ({why}): set it aside in {aside}/ and started a fresh one; "
        "its targets run again"
    )
    return aside


def set_aside_store(store_dir: Path, why: str) -> None:
    """``.memotest`` itself is not a folder (a file, a dangling symlink): it is moved into
    the ``damaged-<time>`` folder of a new, empty ``.memotest``."""
    moved = store_dir.with_name(f"{store_dir.name}.damaged-{os.getpid()}")
    os.replace(store_dir, moved)
    store_dir.mkdir()
    set_aside(store_dir, [moved], why)


def discard_blob(path: Path, what: str, *, say: bool) -> None:
    """Delete the damaged blob at ``path`` (the next run that makes that content stores
    it anew) and, when ``say``, say so."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if say:
        warn(
            f"the store is damaged ({what}): deleted it; "
            "the targets whose results named it run again"
        )


def clear_lock(lock: Path) -> None:
    """A folder in the place of the lock file holds nothing: delete it."""
    if os.path.isdir(lock) and not os.path.islink(lock):
        shutil.rmtree(lock, ignore_errors=True)


def warn(message: str) -> None:
    """One line on stderr, as memotest's other messages."""
    print(f"memotest: {message}", file=sys.stderr, flush=True)


def _prune(store_dir: Path) -> None:
    """Keep the newest :data:`KEEP_DAMAGED` folders of what was set aside."""
    olds = sorted(p for p in store_dir.iterdir() if p.name.startswith(DAMAGED_PREFIX))
    for old in olds[:-KEEP_DAMAGED]:
        shutil.rmtree(old, ignore_errors=True)


def wipe(store_dir: Path, lock_timeout: float) -> None:
    """Delete the store ``store_dir``, whatever is there, without reading anything in it
    (``memotest clean`` always works): a file or a dangling symlink in its place is
    deleted; a folder is emptied under the build lock (a lock that is a folder first)."""
    if not_a_folder(store_dir) is not None:
        store_dir.unlink()
        return
    if not store_dir.exists():
        return
    lock = store_dir / LOCK_FILE
    clear_lock(lock)
    fd = acquire_lock(lock, lock_timeout)
    try:
        empty(store_dir)
    finally:
        release_lock(fd)


def empty(folder: Path) -> None:
    """Delete every entry of ``folder`` but the lock file."""
    for entry in folder.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
