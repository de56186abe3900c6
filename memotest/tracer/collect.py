"""Turns the shim's events and the poller's sightings into a :class:`Trace`.

Three jobs: classify each path by what the tree did with it first (a file the tree
replaced before reading is an output, not an input; one it changed in place, ``U``, keeps
what it held, so a read after the change is still a read of an input), pair every
``exec`` with the announcement of the new image (an image that never announced itself ran
without the shim), and fold in the processes that polling saw but the shim never reported.

An image that never announced itself did not always run without the shim: a pager a test
starts and kills at once dies before its first call into the C library (its parent reaped
it killed by a signal: the shim's ``G``, the next record of that pid after its ``E``). The shim
announces an image (``P``) in its constructor or at the first call it interposes,
whichever comes first; so an image that had the shim loaded and never announced itself
made no such call in its whole life: it ran the dynamic loader and no code that opened,
stat'ed, listed, executed or connected to anything. It had the shim loaded when three
things hold: the process found this same shim file at ``MEMOTEST_SHIM`` right before its
``execve`` (the shim's ``H`` record: same device and inode, in the root and mount
namespace the new image keeps), the program is started by glibc's loader
(``elf.loads_the_shim``: it preloads ``LD_PRELOAD`` before any code of the program runs),
and nothing makes the loader ignore ``LD_PRELOAD`` (``elf.why_untraceable``: setuid,
file capabilities, another ELF class, Go). Such an exec is not a hole in the trace; its
program file is an input as any executed file.

Order across processes: the shim writes a replacement's record (``W``, ``N``, ``D``)
after the call made it, and a read's (``R``) after the open but before any byte is read,
so a replacement logged before a read happened before that read's data, whatever the
processes; a read logged first is a read of the input anyway. A change in place needs no
order at all: the earlier content survives it, so every read of the file counts.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from memotest.lazy import lazy_module
from memotest.model import ORDERLESS_PROGRAMS, Incomplete, ProcessInfo, Trace
from memotest.tracer.creations import OR_STATES, held_as, mkdir_p
from memotest.tracer.elf import loads_the_shim, why_untraceable
from memotest.tracer.listing_reports import Listings, combined
from memotest.tracer.log import Event
from memotest.tracer.procwatch import Seen
from memotest.world.network import unix_path_not_there

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_module("psutil")  # imported while a run is watched only

PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
#: Under a pseudo root, but real files: ``/dev/shm`` is a tmpfs (POSIX shared memory and
#: semaphores, and any file a program puts there).
REAL_UNDER_PSEUDO = ("/dev/shm",)
ABSENT_ERRNOS = {str(errno.ENOENT), str(errno.ENOTDIR)}


def is_pseudo(path: str) -> bool:
    """Paths of kernel file systems, which are never inputs. A path that names a real file
    through ``/proc`` or ``/dev`` (``/proc/self/cwd/x``, ``/dev/fd/3``, ``/dev/stdin``) has
    already been rewritten by the shim to the file it names (``_shim/procfs.c``); what is
    left there names no file (a pipe, a socket, a terminal, kernel state)."""
    if not path.startswith(PSEUDO_ROOTS):
        return False  # the test below for nearly every path, at the cost of one call
    if any(path == r or path.startswith(r + "/") for r in REAL_UNDER_PSEUDO):
        return False
    return any(path == r or path.startswith(r + "/") for r in PSEUDO_ROOTS)


def resolve_dotdot(path: str) -> str:
    """Resolves ``..`` against the real file system: ``link/..`` is the parent of the
    link's target, not of the link. The last component itself is kept as it is."""
    if "/.." not in path:
        return path
    head, tail = os.path.split(path)
    if tail == "..":
        return os.path.realpath(path)
    return os.path.join(os.path.realpath(head), tail)


def build_trace(
    *,
    command: list[str],
    exit_code: int,
    root_pid: int,
    events: list[Event],
    damage: str | None,
    records_lost: bool,
    seen: list[Seen],
    leftovers: list[psutil.Process],
    shim: str,
    trace_dir: str,
    worker_pid: int | None = None,
    listing_reports: Mapping[int, Listings | None] | None = None,
    vouched: Collection[int] = (),
    own_reads: Collection[tuple[int, str]] = (),  # (pid, path): tracer/warm/vouched.py
) -> Trace:
    """``worker_pid``: the warm worker the command was forked from (``tracer/warm/``): what it
    listed, the run reports on as on its own listings (``worker/listings.py``).
    ``listing_reports``: what processes of the tree reported of their listings, by pid
    (``tracer/listing_reports.py``); those of ``vouched`` pids are taken as they are (a
    worker's run, for itself and the worker), the others only from a pid that was one
    process image in the whole trace. They make ``Trace.listings``."""
    trace = Trace(command=command, exit_code=exit_code)
    incomplete = trace.incomplete
    changed: set[str] = set()  # paths the tree wrote or deleted so far
    images: dict[int, ProcessInfo] = {}
    timed = trace.timed = set()
    announced: Counter[int] = Counter()
    pending: dict[int, list[str]] = {}  # own execs awaiting the new image's P
    spawned: list[tuple[int, str]] = []  # posix_spawn children: their P may come first
    exec_paths: set[str] = set()
    reachable: set[tuple[int, str]] = set()  # own execs that found this shim (``H``)
    last_exec: dict[int, str] = {}  # pid: the path of its own E, while nothing followed
    killed: set[tuple[int, str]] = set()  # own execs reaped killed by a signal next
    skip = (trace_dir, trace_dir + "/")
    listers: dict[str, set[int]] = {}  # folder: the pids that listed it
    two_lives: set[int] = set()  # pids seen as another image, or listing before theirs
    norm: dict[str, str | None] = {}
    by_pid: dict[int, bool] = {}  # whether the image of a pid is orderless (``T``)
    seen_as: dict[str, set[str]] = {}  # "absent or ..." (``Y``, ``V``, ``Q``, ``J``)
    read_back: set[str] = set()  # of those, read by the tree, before or after the call
    strictly_missing: set[str] = set()  # missed by any other lookup (``M``)

    def clean(raw: str) -> str | None:
        got = norm.get(raw, "")
        if got != "":
            return got
        path = resolve_dotdot(raw)
        out = None if is_pseudo(path) or path.startswith(skip) or path == shim else path
        norm[raw] = out
        return out

    elsewhere = trace.read_elsewhere
    for ev in events:
        op = ev.op
        if op == "G":  # written by the reaper, under the child's pid
            path = last_exec.pop(ev.pid, None)
            if path is not None:
                killed.add((ev.pid, path))
            continue
        if op == "E" and len(ev.fields) == 1:
            last_exec[ev.pid] = ev.path
        elif not (op == "E" or op == "H"):
            last_exec.pop(ev.pid, None)  # the image (or a new one of that pid) did something
        if op in "RSTMYVQJ":
            path = clean(ev.path)
            if op == "R" and path in seen_as:
                read_back.add(path)  # what an open that keeps the bytes found, it read
            if path is not None and path not in changed:
                if op == "M" and mkdir_p(images.get(ev.pid)):
                    op = "Y"
                if op in OR_STATES:
                    if op == "J":  # a rename onto it, or an unlink that left it absent
                        changed.add(path)
                    if path in trace.reads:
                        continue  # read before: its content says more than "absent or"
                    seen_as.setdefault(path, set()).add(OR_STATES[op])
                    op = "M"  # absent or that state: the same to its caller
                elif op == "M":
                    strictly_missing.add(path)
                (trace.reads if op == "R" else trace.missing if op == "M" else trace.stats).add(
                    path
                )
                if op == "T":
                    orderless = by_pid.get(ev.pid)
                    if orderless is None:
                        orderless = by_pid[ev.pid] = _orderless(images.get(ev.pid))
                    if not orderless:
                        timed.add(path)
                if op != "M" and ev.pid != root_pid and (ev.pid, path) not in own_reads:
                    elsewhere.add(path)
        elif op in "WNDU":
            path = clean(ev.path)
            if path is not None:
                # ``U`` (changed in place) keeps what the file held: reads after it still
                # see the content from before the run, so they stay reads.
                if op != "U":
                    changed.add(path)
                trace.first_change.setdefault(path, op)
                if op != "N":
                    trace.altered.add(path)
                (trace.deleted if op == "D" else trace.writes).add(path)
        elif op == "L":
            path = clean(ev.path)
            if path is not None:
                trace.listed.add(path)
                listers.setdefault(path, set()).add(ev.pid)
                if not announced[ev.pid]:
                    two_lives.add(ev.pid)  # the image before an exec, or a forked child
        elif op == "O":
            path = clean(ev.path)
            if path is not None:
                trace.loaded.add(path)
        elif op == "C":
            trace.connects.add(ev.path)
            gone = unix_path_not_there(ev.path)
            if gone is not None and gone not in changed:
                # what the connect found is the path's absence: an input as any failed
                # lookup, under /dev too (``/dev/log`` appears when a syslog starts)
                trace.missing.add(resolve_dotdot(gone))
        elif op == "B":
            trace.listens.add(ev.path)
        elif op == "A":
            trace.accepted.add(ev.path)
        elif op == "X":
            trace.sockets.add(ev.path)
        elif op == "H":
            reachable.add((ev.pid, ev.path))
        elif op == "E":
            exec_paths.add(ev.path)
            if len(ev.fields) > 1:
                spawned.append((ev.pid, ev.path))
            else:
                pending.setdefault(ev.pid, []).append(ev.path)
        elif op == "F":
            waiting = pending.get(ev.pid, [])
            if ev.path in waiting:
                waiting.remove(ev.path)
                if ev.path not in (p for w in pending.values() for p in w):
                    exec_paths.discard(ev.path)
            if len(ev.fields) > 1 and ev.fields[1] in ABSENT_ERRNOS:
                path = clean(ev.path)
                if path is not None and path not in changed:
                    trace.missing.add(path)
        elif op == "P":
            if announced[ev.pid]:
                two_lives.add(ev.pid)
            announced[ev.pid] += 1
            waiting = pending.get(ev.pid)
            if waiting:
                waiting.pop(0)  # this image answers the exec that came before it
            ppid, exe, cwd, *argv = ev.fields
            images[ev.pid] = ProcessInfo(ev.pid, _int(ppid), exe, argv, cwd, True)
            by_pid.pop(ev.pid, None)
            if exe:
                trace.execs.add(exe)
        elif op == "K":
            if announced[ev.pid]:
                two_lives.add(ev.pid)  # the pid of an image that ended, forked again
            parent = images.get(_int(ev.fields[0]) or -1)
            by_pid.pop(ev.pid, None)
            images.setdefault(
                ev.pid,
                ProcessInfo(
                    ev.pid,
                    _int(ev.fields[0]),
                    parent.exe if parent else None,
                    list(parent.argv) if parent else [],
                    parent.cwd if parent else None,
                    True,
                ),
            )
        elif op == "I":
            incomplete.append(Incomplete(ev.pid, _exe(images, ev.pid), ev.path))

    # Every exec must be answered by the new image announcing itself (PROTOCOL.md).
    # An exec excused as killed before the shim's constructor (the rule above): polling
    # may have seen that process in the same window, before the loader mapped the shim.
    excused = {
        (pid, path)
        for pid, paths in pending.items()
        for path in paths
        if (pid, path) in reachable and (pid, path) in killed and _shim_loads(path)
    }
    unanswered = [
        (pid, path)
        for pid, paths in pending.items()
        for path in paths
        if (pid, path) not in excused
    ]
    unanswered += [(pid, path) for pid, path in spawned if not announced[pid]]
    for pid, path in unanswered:
        reason = why_untraceable(path) or "the program ran without the shim"
        incomplete.append(Incomplete(pid, path, reason))
    trace.execs.update(exec_paths)
    excused_pids = {pid for pid, _path in excused}
    if not announced[root_pid] and root_pid not in pending:
        exe = command[0] if command else None
        reason = why_untraceable(_which(exe)) or "the shim did not load into the command"
        incomplete.append(Incomplete(root_pid, exe, reason))

    # Programs that load the shim but bypass libc (Go).
    for info in images.values():
        reason = why_untraceable(info.exe)
        if reason:
            incomplete.append(Incomplete(info.pid, info.exe, reason))

    # What polling saw that the shim did not report.
    for s in seen:
        if s.pid in images:
            continue
        traced = bool(s.shim_mapped)
        images[s.pid] = ProcessInfo(s.pid, s.ppid, s.exe, s.argv, s.cwd, traced)
        if s.shim_mapped is False and s.pid not in excused_pids:
            reason = why_untraceable(s.exe) or "the shim is not loaded in this process"
            incomplete.append(Incomplete(s.pid, s.exe, reason))
            trace.reads.update(p for p in s.open_files if clean(p) and p not in changed)
            if s.exe:
                trace.execs.add(s.exe)

    for p in leftovers:
        try:
            exe = p.exe()
        except psutil.Error:
            exe = None
        incomplete.append(Incomplete(p.pid, exe, "still running after the command exited"))

    if damage:
        incomplete.append(Incomplete(None, None, damage))
    if records_lost:
        incomplete.append(Incomplete(None, None, "the shim could not write every record"))

    one_image = {pid for pid, n in announced.items() if n == 1} - two_lives
    _listings(trace, listers, listing_reports, vouched, one_image, (root_pid, worker_pid))
    trace.execs = {p for p in (clean(x) for x in trace.execs) if p is not None}
    trace.processes = sorted(images.values(), key=lambda i: i.pid)
    trace.missing_or = held_as(seen_as, read_back | (trace.reads & seen_as.keys()))
    for path in strictly_missing:
        trace.missing_or.pop(path, None)
    trace.incomplete = _dedup(incomplete)
    trace.complete = not trace.incomplete
    return trace


def _listings(
    trace: Trace,
    listers: dict[str, set[int]],
    reports: Mapping[int, Listings | None] | None,
    vouched: Collection[int],
    one_image: set[int],
    own: tuple[int, int | None],
) -> None:
    """``Trace.listings`` from the reports that can be trusted, and the folders listed by a
    process other than the command's own (and the worker's) that reported nothing."""
    trusted = {
        pid: rep for pid, rep in (reports or {}).items() if pid in vouched or pid in one_image
    }
    for path, pids in listers.items():
        if any(pid not in own and pid not in trusted for pid in pids):
            trace.listed_elsewhere.add(path)
    if reports:
        trace.listings = combined(listers, trusted)


def _int(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def _orderless(image: ProcessInfo | None) -> bool:
    """Whether the process is one of :data:`ORDERLESS_PROGRAMS`: its stats are not in the
    run's modification-time order."""
    return image is not None and os.path.basename(image.exe or "") in ORDERLESS_PROGRAMS


def _exe(images: dict[int, ProcessInfo], pid: int) -> str | None:
    info = images.get(pid)
    return info.exe if info else None


def _which(exe: str | None) -> str | None:
    if not exe:
        return None
    if "/" in exe:
        return exe
    import shutil

    return shutil.which(exe)


def _dedup(items: list[Incomplete]) -> list[Incomplete]:
    seen: set[tuple[int | None, str | None, str]] = set()
    out = []
    for i in items:
        key = (i.pid, i.exe, i.reason)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def _shim_loads(path: str) -> bool:
    """Whether the program at ``path`` preloads the shim before any code of its own runs
    (see the module's docstring: the image made no call the shim would have seen)."""
    return why_untraceable(path) is None and loads_the_shim(path)
