"""``memotest-sh``'s stamps: what lets a replayed line cost about what ``sh -c`` costs.

The ``memotest-sh`` make runs is a small C program (``front/front.c``, installed by
``setup.py``); this module is the one writer of what it reads. After the full check
replayed a line (or a line ran, passed and was recorded), the Python side
(:mod:`memotest_make.stamping`) writes the line's *stamp*
(``.memotest/make-stamps/<hash>.stamp`` of the folder make runs in): the front's
context, the environment the line is keyed by, and the stat signature of every path its
record's inputs name. The next time, the front replays the stamp when every one of those
still holds, with no Python started; anything else runs ``memotest-sh-py`` (this
package's :func:`memotest_make.shell.main`), which does the full check and stamps again.

Why a stamp that holds means the record holds (the store's own stat fast path, one step
removed): the signatures are taken at ``T`` and the record is verified by the full
checkers *after* ``T``; a path is stamped only when its ``mtime`` and ``ctime`` are older
than ``T`` minus the racy window (:data:`RACY_WINDOW_NS`), else there is no stamp, so any
change after ``T`` (even one that keeps the size and sets ``mtime`` back) moves ``ctime``
and the signature (``lstat``, and ``stat`` when it is a link: mode, inode, device, size,
``mtime``, ``ctime``). Same signatures now as at ``T`` means the same files, listings,
modes and link texts as when the checkers said the record holds. Records whose inputs
depend on paths they do not name (declared globs) are never stamped. A file held by its
content alone (every input of it a ``file`` one, read through no link: a test binary make
rebuilds every time, the same bytes) is stamped with the SHA-256, mode and link count of
the very bytes whose recorded digest was verified (:func:`content`); when its signature
moved (or was racy) the front hashes it, and then checks the record's modification-time
orders (``order`` inputs: ``make``'s "newer than") against the files' mtimes now.

The key is made of: the command, its folder, the timeout (all in the front's argument
list), the make variables and ``pass_env`` variables (the stamp's patterns and what they
matched, below), memotest's version and key sources (stamped paths) and the process
state. The front's *context* holds the arguments, the folder and its real path, and the
process state as the front reads it (``/proc/self/status`` but for the fields that change
from process to process, ``/proc/self/limits``, the personality, the nice value, the
machine): a superset of :func:`memotest.check.keys.process_state` (:data:`COVERS`; a test fails
when the key gains a part it misses). The front passes its context to ``memotest-sh-py``,
which stamps it as is; the front replays only in an equal context.

The format, fields each ``<decimal length>\\n<bytes>\\n``: the line ``memotest-sh stamp
2``; the context; the number of environment patterns, and each (names or globs of ``*``
and ``?``: ``fnmatch`` in C and ``fnmatchcase`` here agree on those); the number of
variables, and each ``NAME=VALUE`` (the environment's watched variables must be exactly
these); the number of file descriptors, and each (must be closed: make's jobserver was not
passed); the number of paths, and each as three fields (``L`` or ``S``: the path's
``lstat`` or ``stat`` signature, ``mode ino dev size mtime_ns ctime_ns`` or ``-`` for
nothing there; ``E``: it must exist, the signature empty; ``C``: the signature or
:data:`RACY`, a tab, and :func:`content`'s text); the number of orders, and each as its
marks, the number of its files and each file; the message for standard error; the exit
code; then the log, to the end of the file.

What the fast path does not do: mark the variant used in the store (its eviction order
is by the full path's replays) nor fire plugins' ``memotest_after_target``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

#: The sub-folder of ``.memotest/`` with one stamp per memoized line.
STAMPS_DIR = "make-stamps"
MAGIC = b"memotest-sh stamp 2\n"
#: As :data:`memotest.world.fingerprint.RACY_WINDOW_NS` (a test holds them equal).
RACY_WINDOW_NS = 2_000_000_000
#: The kinds whose check depends on the named path alone (``order``: on the mtimes of the
#: record's own files, which are stamped too). ``glob`` is not: its matches are not named.
STAMPABLE_KINDS = frozenset(
    {"file", "absent", "dir", "list", "other", "code", "entries", "section", "order", "effect"}
)
#: Where each part of :func:`memotest.check.keys.process_state` is in the front's context
#: (``memotest-sh --front-context``; a test fails when the key gains a part not listed).
COVERS = {
    "=rlimit_*": "\nlimits\n",
    "=umask": "\nUmask:",
    "=signals-ignored": "\nSigIgn:",
    "=signals-blocked": "\nSigBlk:",
    "=ids": "\nUid:",
    "=groups": "\nGroups:",
    "=nice": "\nnice ",
    "=capabilities": "\nCapEff:",
    "=personality": "\npersonality\n",
    "=machine": "\nmachine ",
}
#: Variables watched whatever ``pass_env`` says: memotest's own (``MEMOTEST_TARGETS``
#: decides what is memoized, ``MEMOTEST_TRACE_DIR`` that a line runs plainly) and make's.
WATCHED = ("MEMOTEST_*", "MAKEFLAGS", "MFLAGS")
#: memotest's modules whose change may change a key without a new version (the package's
#: own ``__init__`` holds the recorder version), and this adapter's sources (relative to
#: its folder).
_KEY_MODULES = ("memotest", "memotest.check.keys", "memotest.load.config", "memotest.world.roots")
_OWN_SOURCES = ("shell.py", "makeflags.py", "stamping.py", "stamp.py")


def signature(path: str, follow: bool = False) -> str | None:
    """``mode ino dev size mtime_ns ctime_ns`` (the front's format), ``-`` when nothing is
    there, None on another error (then nothing can be stamped)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "-"
    except OSError:
        return None
    return f"{st.st_mode} {st.st_ino} {st.st_dev} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


def _racy(sig: str, limit: int) -> bool:
    if sig == "-":
        return False
    mtime, ctime = (int(x) for x in sig.split()[4:6])
    return max(mtime, ctime) >= limit


#: The signature of a file held by its content changed within the racy window: never
#: equal to one the front reads, so its content is always checked.
RACY = "?"


def path_entries(
    paths: Iterable[str], taken_ns: int, contents: Mapping[str, str] | None = None
) -> list[tuple[str, str, str]] | None:
    """``(L, path, lstat signature)`` of each path, and ``(S, path, stat signature)`` of
    each link; None when one cannot be read or was changed too recently to prove anything
    later (racy: see the module's docstring). ``contents``: the files held by their
    content alone, with what :func:`content` read (``SHA256 MODE NLINK``, ``*`` for a
    link count not held): ``(C, path, "SIGNATURE\tCONTENT")``, whose signature may be
    racy (then :data:`RACY`: the front checks the content every time)."""
    contents = contents or {}
    out: list[tuple[str, str, str]] = []
    limit = taken_ns - RACY_WINDOW_NS
    for path in sorted(set(paths)):
        lsig = signature(path)
        if path in contents and lsig is not None:
            stamped = RACY if _racy(lsig, limit) else lsig
            out.append(("C", path, f"{stamped}\t{contents[path]}"))
            continue
        if lsig is None or _racy(lsig, limit):
            return None
        out.append(("L", path, lsig))
        if lsig != "-" and (int(lsig.split()[0]) & 0o170000) == 0o120000:
            sig = signature(path, follow=True)
            if sig is None or _racy(sig, limit):
                return None
            out.append(("S", path, sig))
    return out


def content(path: str, recorded: Sequence[str]) -> str | None:
    """What the front's content check of ``path`` reads (``SHA256 MODE NLINK``, the count
    ``*`` when no recorded digest holds it), when the same read of the bytes has every
    ``recorded`` digest (``observable.file_digest``: xxh3-128, then ``:MODE:NLINK`` or
    ``:MODE:*``; ``file:`` before an effect's); else None. One read for both: the bytes
    stamped are the bytes verified."""
    import hashlib

    import xxhash

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        before = os.fstat(fd)
        if (before.st_mode & 0o170000) != 0o100000:
            return None
        xxh, sha = xxhash.xxh3_128(), hashlib.sha256()
        while chunk := os.read(fd, 1 << 16):
            xxh.update(chunk)
            sha.update(chunk)
        after = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if (before.st_size, before.st_mtime_ns, before.st_ctime_ns) != (
        after.st_size,
        after.st_mtime_ns,
        after.st_ctime_ns,
    ):
        return None
    mode = f"{before.st_mode & 0o7777:o}"
    head = f"{xxh.hexdigest()}:{mode}:"
    held = False
    for digest in recorded:
        digest = digest.removeprefix("file:")
        if digest == head + str(before.st_nlink):
            held = True
        elif digest != head + "*":
            return None
    return f"{sha.hexdigest()} {mode} {before.st_nlink if held else '*'}"


def key_sources() -> list[str]:
    """memotest's sources of the key and this adapter's (their signatures are stamped)."""
    import importlib

    here = os.path.dirname(__file__)
    core = [importlib.import_module(m).__file__ or "" for m in _KEY_MODULES]
    return core + [os.path.join(here, n) for n in _OWN_SOURCES]


def watched_environ(
    patterns: Sequence[str], environ: Mapping[str, str]
) -> tuple[list[str], list[str]] | None:
    """The patterns (with :data:`WATCHED`) and the ``NAME=VALUE`` of every variable they
    match; None when a pattern is one the front may match otherwise (``[``, ``\\``)."""
    import fnmatch

    pats = list(dict.fromkeys([*patterns, *WATCHED]))
    if any(c in p for p in pats for c in "[]\\"):
        return None
    entries = sorted(
        f"{k}={v}" for k, v in environ.items() if any(fnmatch.fnmatchcase(k, p) for p in pats)
    )
    return pats, entries


def _field(data: bytes | str) -> bytes:
    raw = data if isinstance(data, bytes) else os.fsencode(data)
    return b"%d\n%s\n" % (len(raw), raw)


def render(
    *,
    context: str,
    patterns: Sequence[str],
    entries: Sequence[str],
    fds: Sequence[int],
    paths: Sequence[tuple[str, str, str]],
    orders: Sequence[tuple[str, Sequence[str]]],
    message: str,
    exit_code: int,
    log: bytes,
) -> bytes:
    """The stamp's bytes (the format: the module's docstring)."""
    parts = [MAGIC, _field(context), _field(str(len(patterns)))]
    parts += [_field(p) for p in patterns]
    parts += [_field(str(len(entries))), *(_field(e) for e in entries)]
    parts += [_field(str(len(fds))), *(_field(str(fd)) for fd in fds)]
    parts.append(_field(str(len(paths))))
    for kind, path, sig in paths:
        parts += [_field(kind), _field(path), _field(sig)]
    parts.append(_field(str(len(orders))))
    for marks, files in orders:
        parts += [_field(marks), _field(str(len(files))), *(_field(f) for f in files)]
    parts += [_field(message), _field(str(exit_code)), log]
    return b"".join(parts)


def write(path: str, data: bytes) -> None:
    """Writes a stamp atomically (a reader sees the old one or the new one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def remove(path: str) -> None:
    import contextlib

    with contextlib.suppress(OSError):
        os.unlink(path)
