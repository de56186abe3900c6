"""The replay fast path of ``memotest-sh``: a line whose last replay still holds, by ``stat``.

A replayed recipe line should cost about what ``sh -c`` costs, as a no-op ``ninja`` does,
and importing memotest's check (the store, the plugins, the input kinds) costs hundreds
of milliseconds. So after the full check replayed a line, ``memotest-sh`` writes a *stamp*
(``.memotest/make-stamps/``): what the line ran with (its context: below) and the stat
signature of every path its replayed run's inputs name, with its status and log. The
next time, this module, which imports only the standard library and ``xxhash``, replays
the stamp when the context is the same and every path has the same signature; anything
else goes to the full check, which writes a new stamp after it replays.

Why a stamp that holds means the record holds (the store's own stat fast path, one step
removed): the stamp's signatures are taken at ``T`` and the record is verified by the full
checkers *after* ``T``; a signature is stamped only when the path's ``mtime`` and
``ctime`` are older than ``T`` minus the racy window (:data:`RACY_WINDOW_NS`), so any
change after ``T`` (even one that keeps the size and sets ``mtime`` back) moves ``ctime``
and the signature (``lstat``, and ``stat`` when it is a link: mode, inode, device, size,
``mtime``, ``ctime``). Same signatures now as at ``T`` means the same files, listings,
modes and link texts as when the checkers said the record holds. Records whose inputs
depend on paths they do not name (declared globs) are never stamped.

The context is everything the record's key is made of, or more: the memotest version and
the sources of its key and its defaults (their stat signatures), the project root, the
command, the folder (and its real path), the timeout, the make variables the line gets,
the variables its ``pass_env`` patterns match (the patterns stored in the stamp, plus
``--pass-env`` and ``MEMOTEST_PASS_ENV`` now) and the process state (``/proc/self/status``
but for the fields that change from process to process, the resource limits, the nice
value, the personality, the machine): a superset of :func:`memotest.keys.process_state`
(``tests/plugins/test_make_stamp.py`` fails when the key gains a field this misses).

What the fast path does not do: mark the variant used in the store (its eviction order
is by the full path's replays) nor fire plugins' ``memotest_after_target``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence

import xxhash

#: The sub-folder of ``.memotest/`` with one stamp per memoized line.
STAMPS_DIR = "make-stamps"
#: As :data:`memotest.fingerprint.RACY_WINDOW_NS` (a test holds them equal).
RACY_WINDOW_NS = 2_000_000_000
#: The kinds whose check depends on the named path alone (``order``: on the mtimes of the
#: record's own files, which are stamped too). ``glob`` is not: its matches are not named.
STAMPABLE_KINDS = frozenset(
    {"file", "absent", "dir", "list", "other", "code", "entries", "section", "order", "effect"}
)
#: The fields of ``/proc/self/status`` that differ between two runs of the same process.
_VOLATILE = frozenset(
    {
        "Name",
        "State",
        "Tgid",
        "Ngid",
        "Pid",
        "PPid",
        "TracerPid",
        "FDSize",
        "Threads",
        "SigQ",
        "SigPnd",
        "ShdPnd",
        "NStgid",
        "NSpid",
        "NSpgid",
        "NSsid",
        "Kthread",
        "voluntary_ctxt_switches",
        "nonvoluntary_ctxt_switches",
    }
)
_VOLATILE_PREFIXES = ("Vm", "Rss", "Hugetlb")
#: memotest's sources whose change may change a key without a new version: stamped by
#: their signatures (relative to the ``memotest`` package folder).
_KEY_SOURCES = ("__init__.py", "keys.py", "config.py", "roots.py")

#: Where each part of :func:`memotest.keys.process_state` is in :func:`process_state` (a
#: test fails when the key gains a part that is not listed here).
COVERS = {
    "=rlimit_*": "limits",
    "=umask": "Umask",
    "=signals-ignored": "SigIgn",
    "=signals-blocked": "SigBlk",
    "=ids": "ids",
    "=groups": "groups",
    "=nice": "nice",
    "=capabilities": "CapEff",
    "=personality": "personality",
    "=machine": "machine",
}

Sig = tuple[int, int, int, int, int, int]
#: A stamped path with no signature: changed too recently; its content is checked.
CONTENT = "content"


def stamp_path(root: str, name: str) -> str:
    return os.path.join(
        root, ".memotest", STAMPS_DIR, xxhash.xxh3_64_hexdigest(os.fsencode(name)) + ".stamp"
    )


def signature(path: str, follow: bool = False) -> Sig | None:
    """``(mode, inode, device, size, mtime_ns, ctime_ns)``; None when nothing is there;
    an error other than absence is ``(-1, ...)`` (never equal to a stamped one)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError:
        return (-1, 0, 0, 0, 0, 0)
    return (st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def process_state() -> dict[str, str]:
    """What a process passes on that a line can see: a superset of the key's
    (:func:`memotest.keys.process_state`), read rather than interpreted."""
    state: dict[str, str] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name not in _VOLATILE and not name.startswith(_VOLATILE_PREFIXES):
                    state[name] = value.strip()
    except OSError:
        pass
    if "Umask" not in state:
        umask = os.umask(0o022)
        os.umask(umask)
        state["Umask"] = oct(umask)
    for name in ("limits", "personality"):
        try:
            with open(f"/proc/self/{name}") as f:
                state[name] = f.read()
        except OSError:
            state[name] = "?"
    if state["limits"] == "?":  # no procfs: the resource module
        import resource

        for lim in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
            state[lim] = repr(resource.getrlimit(getattr(resource, lim)))
    state["ids"] = repr((os.getuid(), os.geteuid(), os.getgid(), os.getegid()))
    state["groups"] = repr(sorted(os.getgroups()))
    state["nice"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    state["machine"] = os.uname().machine
    return state


def _key_sources() -> list[object]:
    """The version and the signatures of the sources of the key (not imported)."""
    import memotest  # the package's __init__: its version, nothing else

    folder = os.path.dirname(memotest.__file__ or "")
    return [
        memotest.__version__,
        folder,
        *(signature(os.path.join(folder, n)) for n in _KEY_SOURCES),
    ]


def context(
    *,
    root: str,
    argv: Sequence[str],
    timeout: float | None,
    env: Mapping[str, str],
    patterns: Sequence[str],
    environ: Mapping[str, str],
) -> str:
    """The digest of what the line's key is made of (see the module's docstring)."""
    cwd = os.getcwd()
    matches = _matcher(patterns)
    passed = sorted((k, v) for k, v in environ.items() if matches(k))
    unset = sorted(p for p in patterns if p not in environ)
    data = [
        _key_sources(),
        root,
        list(argv),
        cwd,
        os.path.realpath(cwd),
        timeout,
        sorted(env.items()),
        list(patterns),
        passed,
        unset,
        sorted(process_state().items()),
    ]
    return xxhash.xxh3_128_hexdigest(json.dumps(data, default=repr).encode("utf-8", "replace"))


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """``fnmatchcase`` against any of ``patterns``, without compiling a regular expression
    for the plain names and the ``PREFIX*`` ones (most of them)."""
    names: set[str] = set()
    prefixes: list[str] = []
    globs: list[str] = []
    for p in patterns:
        head = p[:-1] if p.endswith("*") else p
        if not any(c in head for c in "*?[]"):
            (prefixes.append(head) if p.endswith("*") else names.add(p))
        else:
            globs.append(p)
    starts = tuple(prefixes)

    def matches(name: str) -> bool:
        return (
            name in names
            or (bool(starts) and name.startswith(starts))
            or any(fnmatch.fnmatchcase(name, g) for g in globs)
        )

    return matches


class Stamp:
    """A stamp as read: its header and the replayed log."""

    def __init__(self, header: dict[str, object], log: bytes) -> None:
        self.header = header
        self.log = log

    @classmethod
    def read(cls, path: str) -> Stamp | None:
        try:
            with open(path, "rb") as f:
                data = f.read()
            head, _, log = data.partition(b"\n")
            header = json.loads(head)
        except (OSError, ValueError):
            return None
        if not isinstance(header, dict) or header.get("format") != 1:
            return None
        return cls(header, log)

    def patterns(self) -> list[str]:
        pats = self.header.get("default_patterns")
        return [str(p) for p in pats] if isinstance(pats, list) else []

    def holds(self, digest: str) -> bool:
        """Whether the context is the stamped one and every path has its signature, or,
        for a file held by its content alone, its recorded digest (a rebuilt binary, the
        same bytes: then the stamped mtime orders are checked too)."""
        if self.header.get("context") != digest:
            return False
        paths = self.header.get("paths")
        if not isinstance(paths, list):
            return False
        rehashed = False
        for entry in paths:
            path, lsig, sig, digests = entry
            now = signature(path)
            if lsig == CONTENT or (list(now) if now is not None else None) != lsig:
                if not digests or now is None or not _content_holds(path, now, digests):
                    return False
                rehashed = True
                continue
            if sig is not None or (now is not None and (now[0] & 0o170000) == 0o120000):
                target = signature(path, follow=True)
                if (list(target) if target is not None else None) != sig:
                    return False
        return not rehashed or self._orders_hold()

    def _orders_hold(self) -> bool:
        """The record's mtime orders (``inputs/order.py``): each file's mtime keeps its
        relation (``<`` newer, ``=`` the same) to the one before."""
        for marks, paths in self.header.get("orders") or []:
            mtimes = []
            for path in paths:
                st = signature(path, follow=True)
                if st is None or st[0] == -1:
                    return False
                mtimes.append(st[4])
            for i in range(1, len(mtimes)):
                newer = mtimes[i] > mtimes[i - 1]
                if mtimes[i] < mtimes[i - 1] or newer != (marks[i] == "<"):
                    return False
        return True


def _content_holds(path: str, now: Sig, digests: list[str]) -> bool:
    """Whether a regular file (not a link) has the content, mode and link count each
    recorded digest says (``observable.file_digest``: xxh3-128 of the bytes, then
    ``:MODE:NLINK``, ``*`` for a count not held; ``file:`` before an effect's)."""
    if (now[0] & 0o170000) != 0o100000:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        before = os.fstat(fd)
        h = xxhash.xxh3_128()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        after = os.fstat(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    if (before.st_mtime_ns, before.st_size, before.st_ctime_ns) != (
        after.st_mtime_ns,
        after.st_size,
        after.st_ctime_ns,
    ):
        return False
    head = f"{h.hexdigest()}:{before.st_mode & 0o7777:o}:"
    for recorded in digests:
        recorded = recorded.removeprefix("file:")
        if recorded not in (head + str(before.st_nlink), head + "*"):
            return False
    return True


def write(path: str, header: dict[str, object], log: bytes) -> None:
    """Writes a stamp atomically (a reader sees the old one or the new one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(json.dumps({"format": 1, **header}).encode("utf-8", "surrogateescape"))
        f.write(b"\n")
        f.write(log)
    os.replace(tmp, path)


def remove(path: str) -> None:
    import contextlib

    with contextlib.suppress(OSError):
        os.unlink(path)


def signatures(
    paths: Iterable[str], taken_ns: int, digests: Mapping[str, list[str]] | None = None
) -> list[list[object]] | None:
    """``[path, lstat signature, stat signature when a link, recorded digests]`` of each
    path, or None when one was changed too recently to prove anything later (racy: see
    the docstring). ``digests``: the paths held by their content alone (``file`` inputs,
    no link), with their recorded digests: such a path may be racy (its signature is then
    stamped as no signature, and its content checked every time)."""
    digests = digests or {}
    out: list[list[object]] = []
    limit = taken_ns - RACY_WINDOW_NS
    for path in sorted(set(paths)):
        lsig = signature(path)
        sig = None
        if lsig is not None and (lsig[0] & 0o170000) == 0o120000:
            sig = signature(path, follow=True)
        held = digests.get(path)
        racy = any(s is not None and (s[0] == -1 or max(s[4], s[5]) >= limit) for s in (lsig, sig))
        if racy and not held:
            return None
        stamped: object = CONTENT if racy else (list(lsig) if lsig is not None else None)
        out.append([path, stamped, list(sig) if sig is not None else None, held])
    return out


def replay(stamp: Stamp, target: str, quiet: bool) -> int:
    """Writes the stamped log and returns the stamped exit code, as the full replay does."""
    out = sys.stdout.buffer
    out.write(stamp.log)
    out.flush()
    if not quiet:
        duration = stamp.header.get("duration", 0.0)
        sys.stderr.write(
            f"[memotest] {target}: up to date, replayed "
            f"(the recorded run took {float(duration):.2f}s)\n"  # type: ignore[arg-type]
        )
    code = stamp.header.get("exit_code")
    return int(code) if isinstance(code, int) else 0
